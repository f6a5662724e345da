"""An installed package's tool group imported with a time limit, so a plugin whose import hangs is named.

`EntryPoint.load()` imports the plugin's module, and a module can do anything at import: one waiting on a
server that never answers, or sleeping, hung `klaw tools`, `klaw engine` and `Klaw(...)`'s start for ever, with
no word from klaw (adversary26). The import runs in a thread of its own: after `SAY_AFTER_SECONDS` the
plugin still importing is named in a warning with how to start without it, and after `LIMIT_SECONDS` klaw
stops waiting and the group is left out as failed (`PluginImportHangs`), like one whose import raised. The
thread cannot be stopped: it is a daemon, left to finish or to die with the process; its module is never
used. A plugin that imports slowly but surely (a large library on a slow disk) has a minute (decision 466).

An import in a thread cannot install signal handlers (`signal.signal` is for the main thread): a plugin doing
so at import fails to load, in words, as any import that raises does.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from importlib.metadata import EntryPoint
from typing import TypeVar

from klaw.errors import KlawError

log = logging.getLogger(__name__)
T = TypeVar("T")
SAY_AFTER_SECONDS = 5.0  # a plugin still importing is named by then
LIMIT_SECONDS = 60.0  # and left out after this long


class PluginImportHangs(KlawError, RuntimeError):
    """A plugin's import (or its provider, `PluginProviderHangs`) had not finished after `LIMIT_SECONDS`."""


class PluginProviderHangs(PluginImportHangs):
    """A plugin's provider had not returned after `LIMIT_SECONDS` (decision 540)."""


def load_within(point: EntryPoint, how_to_leave_out: str) -> object:
    """`point.load()`, waited for at most `LIMIT_SECONDS`; what it raises is raised here (`SystemExit` too).
    `how_to_leave_out` is the warning's fix: "remove NAME from tools.enabled"."""
    doing = f"still importing {point.value} (tool group {point.name!r})"
    return call_within(point.load, point.name, (doing, "its import"), how_to_leave_out, PluginImportHangs)


def call_within(
    work: Callable[[], T],
    group: str,
    said: tuple[str, str],
    how_to_leave_out: str,
    hangs: type[PluginImportHangs],
) -> T:
    """`work()` in a thread of its own, waited for at most `LIMIT_SECONDS`: after `SAY_AFTER_SECONDS` a warning
    says what is under way and `how_to_leave_out`; past the limit `hangs` is raised. `said`: the warning's
    start ("still importing X (tool group 'g')") and what hangs ("its import").
    A plugin's provider runs this way too (decision 540): a provider sleeping 40 s held every start 40 s,
    silently. Blocking: the engine's start calls it from a worker thread, off the event loop."""
    done: list[T] = []
    raised: list[BaseException] = []

    def run() -> None:
        try:
            done.append(work())
        except BaseException as exc:  # given back to the caller's thread, which decides
            raised.append(exc)

    thread = threading.Thread(target=run, name=f"klaw-plugin-{group}", daemon=True)
    thread.start()
    thread.join(SAY_AFTER_SECONDS)
    doing, what = said
    if thread.is_alive():
        log.warning(
            "%s: klaw waits for it up to %g s in all; if %s hangs, %s to start without it",
            doing,
            LIMIT_SECONDS,
            what,
            how_to_leave_out,
        )
        thread.join(max(0.0, LIMIT_SECONDS - SAY_AFTER_SECONDS))
    if thread.is_alive():
        raise hangs(f"{what} had not finished after {LIMIT_SECONDS:g} s (it hangs?)")
    if raised:
        raise raised[0]
    return done[0]
