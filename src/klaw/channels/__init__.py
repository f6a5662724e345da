"""Channels: gateway, console, web page, Telegram."""
