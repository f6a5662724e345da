"""MiniLM on ONNX Runtime: the graph built from the shipped weights, its cache in KLAW_HOME, the session."""
