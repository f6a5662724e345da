"""The gateway: runs the channels (web page, Telegram) and forwards their messages to the engine."""
