"""`klaw tools NAME` for an installed package's group that `tools.enabled` does not name: its tools, with the
arguments each takes, so a person can see what enabling it offers. An engine never imports a plugin nobody
enabled (decision 478: one whose import hung froze /status); here the person named it, the import is bounded
as at an engine's start (`load_within`), and what it prints goes to stderr. A provider builds its tools from
the engine it joins, so only a list of functions can be shown without one (newcomer21, decision 501)."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from klaw.config import TOOL_PLUGIN_GROUP
from klaw.llm.messages import ToolSpec
from klaw.tools.group_failures import one_line
from klaw.tools.plugin_import import load_within
from klaw.tools.schema import ToolDefinitionError, function_tool

if TYPE_CHECKING:
    from klaw.tools.inventory import ToolRow

INSTALLED_NOT_ENABLED = "installed, not enabled"  # the reason of such a group's row (tools/groups.py)
BROKEN = "installed, not enabled, and broken"  # such a row once `klaw tools` found its import fails (decision 540)


def broken_row(row: ToolRow) -> ToolRow:
    """`row`, an installed group not enabled, said broken when its import fails (bounded, as `klaw tools NAME`
    imports it): the exception's type and first line, never a traceback, and no advice to enable it (newcomer24:
    "installed, not enabled; fix: add broken to tools.enabled" for a plugin that cannot import). Only `klaw
    tools` asks this, in its own process: an engine never imports a plugin nobody enabled (decision 478)."""
    if row.reason != INSTALLED_NOT_ENABLED:
        return row
    failed = import_failure(row.name)
    if failed is None:
        return row
    package = row.source.removeprefix("plugin ").split(" (", 1)[0] or "its package"
    fix = f"its author can mend it, or install what {package} needs (or reinstall it), or uninstall {package}"
    return dataclasses.replace(row, reason=f"{BROKEN}: {failed}", fix=fix)


def import_failure(group: str) -> str | None:
    """Why the installed group `group` cannot be imported ("loading m:TOOLS raised ImportError: …"), None if it can."""
    point = next((point for point in entry_points(group=TOOL_PLUGIN_GROUP) if point.name == group), None)
    if point is None:
        return None
    try:
        with contextlib.redirect_stdout(sys.stderr):  # stdout is `--json`'s
            load_within(point, f"leave {group} out of tools.enabled")
    except (Exception, SystemExit) as exc:
        return f"loading {point.value} raised {one_line(exc)}"
    return None


def tools_of_installed(group: str) -> list[ToolSpec] | str:
    """What the installed group `group` would offer once enabled, or a sentence saying why it cannot be shown."""
    point = next((point for point in entry_points(group=TOOL_PLUGIN_GROUP) if point.name == group), None)
    if point is None:
        return f"no installed package offers {group} now"
    try:
        with contextlib.redirect_stdout(sys.stderr):  # stdout is `--json`'s
            loaded = load_within(point, f"leave {group} out of tools.enabled")
    except (Exception, SystemExit) as exc:
        return f"loading {point.value} raised {one_line(exc)}"
    if not isinstance(loaded, Sequence) or isinstance(loaded, str | bytes):
        return (
            f"{point.value} is a provider, which builds its tools from the engine it joins: add {group} to"
            f" tools.enabled, then `klaw tools {group}` lists them"
        )
    specs = []
    for fn in loaded:
        name = getattr(fn, "__name__", None)
        if not callable(fn) or not isinstance(name, str) or inspect.isclass(fn):
            return f"{point.value} holds what is not a tool ({type(fn).__name__})"
        try:
            specs.append(function_tool(fn, name, None).spec)
        except ToolDefinitionError as exc:
            return f"its tool {name} cannot be offered: {one_line(exc).removeprefix('ToolDefinitionError: ')}"
    return specs
