"""`message_send`: the agent writes to another of the person's chats (docs/tools.md, "Messaging")."""
