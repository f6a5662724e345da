"""Scheduled tasks below the engine: names, schedules, `scheduler.db`, zones and the agent's scheduling tools.

The engine's loop that fires them is `klaw/engine/scheduler_loop.py`, assembled by
`klaw/engine/scheduler_assembly.py` (docs/decisions/001-feature-packages.md).
"""
