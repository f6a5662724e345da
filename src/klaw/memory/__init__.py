"""Memory: the conversation log, embedders, embedding queue, hybrid search, auto-RAG, summaries."""
