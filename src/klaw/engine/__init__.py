"""The engine: processor, context builder, sessions, commands, subagents, scheduler, socket server."""
