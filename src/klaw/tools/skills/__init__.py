"""Skills: folders of instructions under `workspace/skills/<name>/` the agent loads on demand (docs/skills.md)."""
