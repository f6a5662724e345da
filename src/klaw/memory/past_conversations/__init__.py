"""Cross-conversation retrieval: this chat's past segments and exchanges related to the new message."""
