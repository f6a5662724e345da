"""Embedders: turn texts into unit-length float32 vectors (local MiniLM, OpenAI-compatible, fake)."""
