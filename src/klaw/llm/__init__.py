"""Chat and embedding model access: protocols, the OpenAI-compatible client, routing, a fake server."""
