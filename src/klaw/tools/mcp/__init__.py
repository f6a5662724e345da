"""Tools from MCP servers configured in engine.yaml (`mcp.servers`), through the official `mcp` SDK."""
