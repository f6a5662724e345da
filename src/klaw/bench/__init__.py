"""Benchmarks: retrieval quality and scale, embedder throughput, engine overhead."""
