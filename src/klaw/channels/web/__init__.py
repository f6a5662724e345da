"""The web page: chat with streaming replies, memory inspector, memory search and settings."""
