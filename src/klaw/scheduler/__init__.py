"""Scheduled tasks as data: names, schedules and `scheduler.db`; the engine's loop runs them."""
