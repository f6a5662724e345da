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
from importlib.metadata import EntryPoint

from klaw.errors import KlawError

log = logging.getLogger(__name__)
SAY_AFTER_SECONDS = 5.0  # a plugin still importing is named by then
LIMIT_SECONDS = 60.0  # and left out after this long


class PluginImportHangs(KlawError, RuntimeError):
    """A plugin's import had not finished after `LIMIT_SECONDS`."""


def load_within(point: EntryPoint, how_to_leave_out: str) -> object:
    """`point.load()`, waited for at most `LIMIT_SECONDS`; what it raises is raised here (`SystemExit` too).
    `how_to_leave_out` is the warning's fix: "remove NAME from tools.enabled"."""
    loaded: list[object] = []
    raised: list[BaseException] = []

    def run() -> None:
        try:
            loaded.append(point.load())
        except BaseException as exc:  # given back to the caller's thread, which decides
            raised.append(exc)

    thread = threading.Thread(target=run, name=f"klaw-plugin-import-{point.name}", daemon=True)
    thread.start()
    thread.join(SAY_AFTER_SECONDS)
    if thread.is_alive():
        log.warning(
            "still importing %s (tool group %r): klaw waits for it up to %g s in all; if its import hangs,"
            " %s to start without it",
            point.value,
            point.name,
            LIMIT_SECONDS,
            how_to_leave_out,
        )
        thread.join(max(0.0, LIMIT_SECONDS - SAY_AFTER_SECONDS))
    if thread.is_alive():
        raise PluginImportHangs(f"its import had not finished after {LIMIT_SECONDS:g} s (it hangs?)")
    if raised:
        raise raised[0]
    return loaded[0]
