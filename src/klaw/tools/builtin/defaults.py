"""Which built-in tools a fresh engine offers; one list, so adding a tool is a one-line change."""

from __future__ import annotations

from klaw.tools.builtin.clock_tools import current_time
from klaw.tools.builtin.workspace_files import file_list, file_read, file_write, file_write_prompts_too
from klaw.tools.registry import ToolRegistry


def register_builtin_tools(registry: ToolRegistry, *, allow_prompt_edits: bool = False) -> None:
    """Register every built-in tool under its function name; `file_write` may change the prompt files
    only with `allow_prompt_edits` (`tools.allowPromptEdits`)."""
    writer = file_write_prompts_too if allow_prompt_edits else file_write
    for tool in (current_time, file_read, writer, file_list):
        registry.register(tool, name=tool.__name__ if tool is not writer else "file_write")
