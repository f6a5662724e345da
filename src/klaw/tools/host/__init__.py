"""`host_exec`: commands on the host, allowed by pattern in engine.yaml (docs/sandbox.md)."""
