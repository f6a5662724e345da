"""The one way tools join the engine: a group, named as `tools.enabled` names it, and its provider.

klaw's own groups (tools/builtin/groups.py) and installed packages' (the `klaw.tools` entry point
group) are providers of one shape, found by name the same way and called the same way (decision 180):

* a sequence of typed `async def` functions with docstrings, offered under their own names; or
* a callable taking a `ToolSetup` and returning such a sequence, or None once it has registered its
  tools itself (under other names, or noting one unavailable for /status); or
* a `GroupProvider` wrapping such a callable with the engine services it `needs`.

The tools a provider registers are that group's: a model is offered them when its groups include
the name (`models.<id>.tools`, else `tools.enabled`; klaw/tools/selection.py). A group whose needed
services do not exist yet is provided at a later `provide` (the scheduler's tools once the scheduler
is built). A provider that fails, or hands over something that cannot be a tool, is logged naming the
group and left out whole; the engine starts and turns run without it.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

from klaw.config import ALL_TOOL_GROUPS, MCP_GROUP_PREFIX, TOOL_PLUGIN_GROUP, EngineConfig
from klaw.home import KlawHome
from klaw.tools import plugins_seen
from klaw.tools.group_failures import GroupFailure, GroupSource, not_installed, one_line, shadowing, tool_refused
from klaw.tools.plugin_import import PluginImportHangs, PluginProviderHangs, call_within, load_within
from klaw.tools.plugin_preview import INSTALLED_NOT_ENABLED
from klaw.tools.provider_shape import entry_point_misread
from klaw.tools.registry import DuplicateToolName, ToolRegistry
from klaw.tools.schema import ToolDefinitionError, ToolFunction

log = logging.getLogger(__name__)
# What a package's group may raise as it loads or provides its tools and be left out for: any error, and
# `sys.exit()` in its import, which ended the engine's start and `klaw tools` (adversary21).
PLUGIN_FAULTS = (Exception, SystemExit)

T = TypeVar("T")


class ServiceKey(Generic[T]):
    """The name of one engine service a provider may use, typed: `setup.service(MEMORY)` is a MemoryServices.
    Keys compare by identity, so two packages choosing the same name cannot read each other's service."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"ServiceKey({self.name!r})"


@dataclass(frozen=True, slots=True)
class ToolSetup:
    """What a group's provider builds its tools from: the registry (for a tool under a name of its own,
    or `note_unavailable` for /status), the engine's configuration and home, and its services."""

    registry: ToolRegistry
    config: EngineConfig
    home: KlawHome
    services: Mapping[ServiceKey[Any], object]

    def service(self, key: ServiceKey[T]) -> T:
        """The service `key` names; LookupError when the engine has none (its group declares what it needs)."""
        if key not in self.services:
            raise LookupError(f"the engine offers no service {key.name!r} to tool groups")
        return cast("T", self.services[key])


ProvideTools = Callable[[ToolSetup], Iterable[ToolFunction] | None]


@dataclass(frozen=True, slots=True)
class GroupProvider:
    """A provider that needs engine services which exist only part-way through the start. `tools`: the
    names of the tools it may register (or note unavailable), known without running it, so a held name
    of a group not enabled is said to be that group's rather than misspelt (decision 330)."""

    provide: ProvideTools
    needs: tuple[ServiceKey[Any], ...] = ()
    tools: tuple[str, ...] = ()


ToolProvider = Sequence[ToolFunction] | ProvideTools | GroupProvider
"""What a group's name stands for: its tools, or what provides them (the module docstring's three forms)."""


class ToolGroups:
    """The enabled groups' providers, klaw's and installed packages' alike, and the group of each tool."""

    def __init__(
        self, enabled: Iterable[str], builtin: Mapping[str, ToolProvider], seen_file: Path | None = None
    ) -> None:
        """`enabled`: every group some model is offered (EngineConfig.tool_groups); `builtin`: klaw's own
        providers by name; `seen_file`: the home's record of the package offering each plugin group
        (tools/plugins_seen.py), None for none. klaw's groups are provided in `builtin`'s order, then the
        others in `enabled`'s, so the order tools are offered in (and prompts cached by) does not depend on
        how they are listed."""
        names = [name for name in dict.fromkeys(enabled) if not name.startswith(MCP_GROUP_PREFIX)]
        plugins = [name for name in names if name not in builtin]
        self._enabled, self._builtin = frozenset(names), frozenset(builtin)
        self._pending: dict[str, GroupProvider] = {}
        for name in [name for name in builtin if name in names]:
            self._pending[name] = _as_provider(builtin[name])
        self.sources: dict[str, GroupSource] = {name: GroupSource(name, builtin=True) for name in self._pending}
        self.failures: dict[str, GroupFailure] = {}
        self._pending.update(_installed(plugins, self.sources, self.failures, seen_file))
        self._group_of: dict[str, str] = {}
        self._unavailable_in: dict[str, str] = {}
        self._builtin_providers = builtin
        self._offering: dict[str, str] | None = None
        self._unlisted: list[str] = []

    def provide(self, setup: ToolSetup) -> None:
        """Call each provider not called yet whose needed services `setup` has; record its tools' group."""
        for name, provider in list(self._pending.items()):
            if all(key in setup.services for key in provider.needs):
                del self._pending[name]
                self._provide(name, provider, setup)

    def installed_unused(self) -> list[GroupFailure]:
        """Installed packages' groups that load nowhere, each with why and what to do: one no model's
        groups name (`tools.enabled`), and one whose name is a built-in group's, which klaw's own group
        always wins. Asked by the listing only: an engine's start scans entry points only for the
        plugins it loads (decision 239)."""
        notes = []
        for point in entry_points(group=TOOL_PLUGIN_GROUP):
            source = GroupSource(point.name, False, point.dist.name if point.dist is not None else None, point.value)
            package = source.package or "its package"
            if point.name in self._builtin:
                notes.append(shadowing(source, package))
            elif point.name not in self._enabled:
                notes.append(GroupFailure(source, INSTALLED_NOT_ENABLED, f"add {point.name} to tools.enabled"))
        return notes

    def builtin_not_enabled(self) -> dict[str, list[str]]:
        """klaw's own groups no model is offered, each with its tools' names: `klaw tools` lists them, so a group
        added since an older `klaw init` wrote tools.enabled is seen (newcomer19, decision 476)."""
        return {
            group: list(provider.tools) if isinstance(provider, GroupProvider) else [_tool_name(f) for f in provider]
            for group, provider in self._builtin_providers.items()
            if group not in self._enabled and isinstance(provider, GroupProvider | Sequence)
        }

    def disabled_group_offering(self, tool: str) -> str | None:
        """The group not enabled whose tools include `tool`, so a `tools.approval` name no offered tool has
        is said to be that group's rather than misspelt. Only klaw's own groups can say (a plain list like
        `clock`'s, or a provider naming its `tools`): an installed package's group not enabled is never
        imported to word a warning (`disabled_groups_unlisted`)."""
        return self._offerings().get(tool)

    def disabled_groups_unlisted(self) -> list[str]:
        """Installed packages' groups not enabled: their tools are not known, since klaw does not import a
        plugin the person did not enable (adversary27 M3: one whose import hung froze the engine's /status
        and `klaw chat`'s start 60 s; decision 478), so a held name no tool has may be one of theirs and is
        not said to be misspelt (tools/inventory.py words it, decision 343)."""
        self._offerings()
        return self._unlisted

    def _offerings(self) -> dict[str, str]:
        if self._offering is None:
            self._offering = {}
            for group, names in self.builtin_not_enabled().items():
                for name in names:
                    self._offering.setdefault(name, group)
            self._unlisted = [
                point.name
                for point in entry_points(group=TOOL_PLUGIN_GROUP)
                if point.name not in self._enabled and point.name not in self._builtin
            ]
        return self._offering

    def group_of(self, tool: str) -> str | None:
        """The group that offered `tool`, None for a tool of no group (a program's own; an MCP server's)."""
        return self._group_of.get(tool)

    def noted_by(self, tool: str) -> str | None:
        """The group that noted `tool` unavailable (`ToolRegistry.note_unavailable`), None if none did."""
        return self._unavailable_in.get(tool)

    def _provide(self, name: str, provider: GroupProvider, setup: ToolSetup) -> None:
        before = set(setup.registry.names)
        noted = set(setup.registry.unavailable)
        try:
            with _printing_aside():
                tools = self._call(name, provider, setup)
            for tool in _functions(tools):
                setup.registry.register(tool)
        except PLUGIN_FAULTS as exc:
            for added in set(setup.registry.names) - before:  # all or nothing: a bad tool leaves the group out
                setup.registry.remove(added)
            log.error("tool group %r is left out: %s: %s", name, type(exc).__name__, exc)
            source = self.sources[name]
            if isinstance(exc, PluginProviderHangs):
                self.failures[name] = GroupFailure(
                    source,
                    f"calling {source.target}: {exc}",
                    f"remove {name} from tools.enabled (or uninstall {source.package or 'the package'}); its author"
                    " can say what its provider waits for",
                )
                return
            if isinstance(exc, DuplicateToolName):
                self.failures[name] = self._clash(name, exc.name)
                return
            if isinstance(exc, ToolDefinitionError) and not source.builtin:  # the tool's author's to mend
                self.failures[name] = tool_refused(name, source, exc)
                return
            fix = (
                "a fault in klaw: report it"
                if source.builtin
                else f"update or reinstall {source.package or 'the package'}, or remove {name} from tools.enabled"
            )
            self.failures[name] = GroupFailure(source, f"its provider raised {one_line(exc)}", fix)
            return
        self._group_of.update(dict.fromkeys([n for n in setup.registry.names if n not in before], name))
        self._unavailable_in.update(dict.fromkeys([n for n in setup.registry.unavailable if n not in noted], name))

    def _call(self, name: str, provider: GroupProvider, setup: ToolSetup) -> Iterable[ToolFunction] | None:
        """An installed package's provider runs bounded as its import is (decision 540: one sleeping 40 s held
        every start 40 s, without a word); klaw's own run as they are."""
        source = self.sources[name]
        if source.builtin:
            return provider.provide(setup)
        doing = f"still waiting for the provider {source.target} of tool group {name!r} ({source.package})"
        said = (doing, "its provider")
        return call_within(
            lambda: provider.provide(setup), name, said, f"remove {name} from tools.enabled", PluginProviderHangs
        )

    def _clash(self, name: str, tool: str) -> GroupFailure:
        """Group `name` left out because its `tool` has the name of another group's tool (or of another of
        its own): no update of either package mends that. The fix says who can do what: a plugin's author
        can rename the tool (klaw's built-in keeps its name), the person can choose one of the two groups."""
        other = self._group_of.get(tool)
        if other is None:
            reason = f"it offers two tools named {tool!r}"
            return GroupFailure(
                self.sources[name],
                reason,
                f"{self._author(name)} can rename one of them; you can remove {name} from tools.enabled",
            )
        reason = f"its tool {tool!r} has the name of a tool of {other} ({self.sources[other].describe()})"
        plugins = [group for group in (name, other) if not self.sources[group].builtin]
        authors = " or ".join(self._author(group) for group in plugins) or "klaw"
        return GroupFailure(
            self.sources[name],
            reason,
            f"two groups cannot offer one tool name: {authors} can rename its tool {tool!r};"
            f" you can remove {name} or {other} from tools.enabled",
        )

    def _author(self, group: str) -> str:
        """Who can rename a tool of plugin `group`: its package's author."""
        package = self.sources[group].package
        return f"the author of {package}" if package else f"the author of {group}'s package"


def _as_provider(loaded: object) -> GroupProvider:
    if isinstance(loaded, GroupProvider):
        return loaded
    if callable(loaded):
        return GroupProvider(cast("ProvideTools", loaded))
    return GroupProvider(lambda _setup: cast("Iterable[ToolFunction]", loaded))


def _printing_aside() -> contextlib.AbstractContextManager[object]:
    """What a group prints as it loads or provides its tools goes to stderr: stdout is `klaw mcp serve`'s
    protocol and `klaw tools --json`'s JSON, which one `print` at a plugin's import broke (decision 455)."""
    return contextlib.redirect_stdout(sys.stderr)


def _functions(tools: Iterable[ToolFunction] | None) -> Sequence[ToolFunction]:
    if inspect.iscoroutine(tools):  # a provider written `async def`: its coroutine is never awaited
        tools.close()
        raise TypeError("a tool group's provider must be a plain def (not async def) giving a list of tools")
    if tools is None:
        return ()
    if not isinstance(tools, Iterable) or isinstance(tools, str | bytes):
        raise TypeError("a tool group's provider must give a list of async functions (or register them itself)")
    return list(tools)


def _installed(
    names: Sequence[str], sources: dict[str, GroupSource], failures: dict[str, GroupFailure], seen_file: Path | None
) -> dict[str, GroupProvider]:
    """The providers installed packages declare for `names` (their sources recorded, and their packages in
    `seen_file`); a name none declares, or one that fails to load, is logged and recorded as a failure."""
    if not names:
        return {}
    found = {point.name: point for point in entry_points(group=TOOL_PLUGIN_GROUP)}
    plugins_seen.note(seen_file, {name: found[name] for name in names if name in found})
    for name in sorted(set(found) & set(sources)):  # a built-in group's name: klaw's own is loaded
        log.warning(
            "an installed package's tool group %r (%s) is ignored: klaw has a group of that name",
            name,
            found[name].value,
        )
    providers: dict[str, GroupProvider] = {}
    for name in names:
        point = found.get(name)
        if point is None:
            log.warning("tools.enabled names %r, which no installed package offers (%s)", name, TOOL_PLUGIN_GROUP)
            earlier = plugins_seen.seen(seen_file, name) if seen_file is not None else None
            failures[name] = not_installed(name, [*ALL_TOOL_GROUPS, *found], earlier)
            continue
        package = point.dist.name if point.dist is not None else None
        sources[name] = source = GroupSource(name, False, package, point.value)
        try:
            with _printing_aside():  # an import that hangs is named, then left out (decision 466)
                loaded = load_within(point, f"remove {name} from tools.enabled")
            if (misread := entry_point_misread(loaded)) is not None:  # `TOOLS = weather`: called, it would run
                what, write = misread
                attribute = point.value.rpartition(":")[2] or "TOOLS"
                log.error("tool group %r (%s) is left out: it names %s, not a list", name, point.value, what)
                failures[name] = GroupFailure(
                    source,
                    f"{point.value} is {what}, where a list of tools (or a provider taking a ToolSetup) is expected",
                    f"{write.format(attribute=attribute)} in {package or 'the package'}, or remove {name} from"
                    " tools.enabled",
                )
                continue
            providers[name] = _as_provider(loaded)
        except PLUGIN_FAULTS as exc:
            log.error("tool group %r (%s) is left out: %s: %s", name, point.value, type(exc).__name__, exc)
            hangs, package = isinstance(exc, PluginImportHangs), package or "the package"
            failures[name] = GroupFailure(
                source,
                f"importing {point.value}: {exc}" if hangs else f"loading {point.value} raised {one_line(exc)}",
                f"remove {name} from tools.enabled (or uninstall {package}); its author can say what its import"
                " waits for"
                if hangs
                else f"install what {package} needs (or reinstall it), or remove {name} from tools.enabled",
            )
    return providers


def _tool_name(fn: object) -> str:
    """The name a function in a group's list is offered under (its own); "" for what is no function."""
    name = getattr(fn, "__name__", "")
    return name if isinstance(name, str) else ""
