"""Why a tool group named in `tools.enabled` offers no tool at all, in a failed row's words: where the group
comes from (`GroupSource`), one line why and one what to do (`GroupFailure`), for the failures whose words
need more than the exception's first line: an entry point named as a built-in group, a name no installed
package offers (uninstalled since, or a slip for a group's name), a plugin's tool that cannot be offered
(decision 501). klaw/tools/groups.py finds them."""

from __future__ import annotations

import difflib
import sys
from collections.abc import Iterable
from dataclasses import dataclass

from klaw.config import TOOL_PLUGIN_GROUP
from klaw.redaction import mask_url_credentials
from klaw.tools.plugins_seen import SeenPackage
from klaw.tools.schema import ToolDefinitionError

REASON_CHARS = 200  # an exception's message in a failure row: one line, clipped


@dataclass(frozen=True, slots=True)
class GroupSource:
    """Where a group comes from: klaw itself, or an installed package's `klaw.tools` entry point
    (`package` its distribution, `target` the entry point's `module:attribute`; both None for a
    name no installed package offers)."""

    group: str
    builtin: bool
    package: str | None = None
    target: str | None = None

    def describe(self) -> str:
        if self.builtin:
            return f"built-in {self.group}"
        if self.target is None:
            return f"plugin {self.package or self.group} (not installed)"
        return f"plugin {self.package or '?'} ({self.group} = {self.target})"


@dataclass(frozen=True, slots=True)
class GroupFailure:
    """A group named in `tools.enabled` whose tools are not offered at all: one line why, one what to do."""

    source: GroupSource
    reason: str
    fix: str


def shadowing(source: GroupSource, package: str) -> GroupFailure:
    """An entry point named as a built-in group: klaw's own group is the one loaded, this one never is."""
    return GroupFailure(
        source,
        f"its name is klaw's built-in group {source.group}'s, which is loaded instead: this one never is",
        f"{package} must offer it under a name of its own (ask its author), or uninstall {package}",
    )


def tool_refused(group: str, source: GroupSource, exc: ToolDefinitionError) -> GroupFailure:
    """A plugin's tool that cannot be offered (a generator, no docstring, a parameter without a type hint):
    named with its module and what to write instead. "its provider raised …; fix: update or reinstall" misled
    the author of a plain list, which has no provider, and whose tool no reinstall mends (decision 501)."""
    where = exc.module or (source.target or "").partition(":")[0] or "its package"
    tool, package = exc.tool, source.package or "its package"
    message = one_line(exc).removeprefix(f"{type(exc).__name__}: ")
    if tool is None:  # no function at all in the list (a name, a call's result)
        return GroupFailure(
            source,
            f"{source.target or where} holds what is not a tool: {message}",
            f"{package}'s author mends {source.target or where} (update it once they have), or remove {group} from"
            " tools.enabled",
        )
    fix = f"tool {tool} in {where}: {exc.fix}" if exc.fix else f"mend tool {tool} in {where} as the reason says"
    return GroupFailure(
        source,
        f"tool {tool} in {where} cannot be offered: {message}",
        f"{fix} ({package}'s author does that: update it once they have), or remove {group} from tools.enabled",
    )


def not_installed(name: str, known: Iterable[str], seen: SeenPackage | None = None) -> GroupFailure:
    """A name `tools.enabled` gives that no installed package offers: a plugin uninstalled (or lost with a
    rebuilt environment), or a slip for a group's name, which difflib's closest names suggest. Left out like
    a plugin whose import fails, so the engine and every command run without it (decision 501). `seen`: the
    package that offered it when klaw last loaded it on this home, named with the command installing it
    again (decision 510); the slip is suggested only without one (a group once installed is no slip)."""
    if seen is not None:
        return GroupFailure(
            GroupSource(name, builtin=False, package=seen.package),
            f"no installed package offers it (entry point group {TOOL_PLUGIN_GROUP}): {seen.package} {seen.version}"
            f" offered it ({seen.target}) when klaw last loaded it, and is no longer installed in klaw's environment",
            f"install {seen.package} again (`{seen.install_command()}`), or remove {name} from tools.enabled",
        )
    like = [other for other in difflib.get_close_matches(name, dict.fromkeys(known), n=1) if other != name]
    slip = f"if you meant {like[0]}, write that; " if like else ""
    return GroupFailure(
        GroupSource(name, builtin=False),
        f"no installed package offers it (entry point group {TOOL_PLUGIN_GROUP}): its plugin is not installed in"
        " klaw's environment, or no longer is",
        f"{slip}install the package that provides {name} in klaw's environment (again, if it was uninstalled:"
        f" `{sys.executable} -m pip install PACKAGE`), or remove it from tools.enabled",
    )


def one_line(exc: BaseException) -> str:
    """`Type: message`, the message's first line clipped, a URL's credentials masked: a row for a chat
    (`/tools`), not a traceback."""
    text = mask_url_credentials(str(exc).strip().splitlines()[0]) if str(exc).strip() else ""
    text = text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
