"""The tools klaw ships with: time, and files inside the agent's workspace."""

from klaw.tools.builtin.defaults import register_builtin_tools

__all__ = ["register_builtin_tools"]
