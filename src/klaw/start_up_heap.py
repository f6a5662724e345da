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

Before that, the `klaw` command line runs its start without the cyclic collector (`klaw.cli.main` turns it
off before importing anything): ~800 modules, their classes and the config's objects are built, nearly all
for the life of the process, and the ~180 young and ~17 older collections meanwhile walked them again and
again for ~0.07-0.1 s of CPU, with almost nothing to free. Every command but the three that start an engine
turns it back on once its name is known (`resume_collector`, from the root callback); `engine`, `chat` and
`serve` keep it off through the engine's start and `keep_start_up_heap` turns it on (decision 411).
"""

from __future__ import annotations

import gc

STARTS_AN_ENGINE = frozenset({"engine", "chat", "serve"})
"""The commands whose collector stays off until their engine has started (`keep_start_up_heap`)."""

YOUNG_THRESHOLD = 7000
"""Allocations (of tracked objects, net of frees) between two young collections; Python's default is 700."""


def keep_start_up_heap() -> None:
    """Freeze what exists (it lives as long as the process), raise the young threshold (never lowering one
    already set higher) and turn the collector on.

    No collection first: after an engine's start it walked all ~80,000 objects to free ~2,500 (~0.4 MB of
    bound methods, tuples and functions left in cycles, pydantic's schema builders among them), ~0.08 s of
    every start's CPU; those now stay, frozen with the rest (decision 411)."""
    gc.freeze()
    young, older, oldest = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG_THRESHOLD), older, oldest)
    gc.enable()


def resume_collector(command: str | None) -> None:
    """The collector back on for `klaw command`, unless it is one that starts an engine (that one's
    `keep_start_up_heap` does it once the engine runs); no command (`klaw --help`): on as well."""
    if command not in STARTS_AN_ENGINE:
        gc.enable()
