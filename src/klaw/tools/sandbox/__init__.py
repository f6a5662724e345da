"""`code_execute`: code the model writes, run in a sandbox (docs/sandbox.md)."""
