"""A long-running klaw process's garbage collector: what was built at start is not looked at again.

Once an engine has started, ~80,000 objects that live as long as the process (modules, classes, functions,
pydantic's and the config's objects) are tracked by Python's cyclic collector, and every full collection
walks all of them: ~85–110 ms of the event loop's CPU on this 2-vCPU machine, once every few hundred turns
with 50 chats at once, and the young collections ran ~80 times per 400 turns at ~1.3 ms each. Together
~0.6–0.7 ms of a turn's 13 ms (decision 303). `gc.freeze()` moves what exists after start into the permanent
generation (the collector never scans it again; objects made later are collected as before), and a higher
first threshold lets the short-lived objects of a turn (request bodies, rows, records) die before a
collection looks at them instead of being walked at every 700 allocations.

Only klaw's own long-running commands do this (`klaw engine`, `chat`, `gateway`, and `klaw bench turn`,
which measures what they run): a program using klaw as a library keeps its own collector settings.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 7000
"""Allocations (of tracked objects, net of frees) between two young collections; Python's default is 700."""


def keep_start_up_heap() -> None:
    """Collect once, then freeze what is left (it lives as long as the process) and raise the young
    threshold, never lowering one already set higher."""
    gc.collect()
    gc.freeze()
    young, older, oldest = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG_THRESHOLD), older, oldest)
