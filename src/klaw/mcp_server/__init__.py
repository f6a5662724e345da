"""`klaw mcp serve`: a chat's memory as an MCP server for other MCP clients."""
