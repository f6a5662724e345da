"""klaw: a self-hosted personal AI agent engine with long-term conversational memory."""

__version__ = "0.1.0"
