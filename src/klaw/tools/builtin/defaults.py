"""Which built-in tools a fresh engine offers; one list, so adding a tool is a one-line change."""

from __future__ import annotations

from klaw.tools.builtin.clock_tools import current_time
from klaw.tools.builtin.workspace_files import file_list, file_read, file_write
from klaw.tools.registry import ToolRegistry


def register_builtin_tools(registry: ToolRegistry) -> None:
    """Register every built-in tool under its function name."""
    for tool in (current_time, file_read, file_write, file_list):
        registry.register(tool)
