"""The stored chats a refusal names: all of a few, the closest few of many.

A mistyped `--chat` was answered with every stored chat, 47 KB on a home with 3,000 (adversary27
L3). Past MAX_NAMED the answer names the NEAREST closest to what was typed (difflib) and counts the
rest (decision 479). Imports nothing of klaw, so the CLI and memory's forget use the same rule.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

MAX_NAMED = 20
"""Chats named whole; past it only the NEAREST closest ones and a count."""
NEAREST = 5


def some_chats(chats: Iterable[object], wanted: str) -> tuple[list[str], str]:
    """The chats' names to show (all of them up to MAX_NAMED, else the NEAREST closest to `wanted`)
    and words counting the ones left out ("" when none is)."""
    names = sorted(set(map(str, chats)))
    if len(names) <= MAX_NAMED:
        return names, ""
    near = difflib.get_close_matches(wanted, names, n=NEAREST, cutoff=0.0)
    return near, f"and {len(names) - len(near)} more of the {len(names)} chats stored (`klaw log check` counts each)"
