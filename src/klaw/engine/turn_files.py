"""The three small files a turn's context starts from: the system prompt, core memory and the skills layer.

They change rarely and are checked every turn. Reading them takes a worker thread (a file read is not the event
loop's to wait for), and that hop cost the turn more than the reads: ~0.1-0.2 ms of the process's CPU and a
wait of ~1-5 ms under load for ~75 µs of work (decision 481). So the loop first asks each for what it read
last, which each gives only when its `stat` stamps are the ones it read at (modification time, size, inode;
the skills' folders and SKILL.md files): no read, a few `stat` calls. Anything changed, missing from memory or
refused (a file it warns about is read, and warned about, at every turn as before): all three are read in one
hop, as they were at every turn before.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from klaw.engine.system_prompt import SystemPrompt
from klaw.memory.core_memory import CoreMemory

log = logging.getLogger(__name__)

Read = tuple[tuple[str, tuple[str, ...]], Mapping[str, Any], str | None]
"""The system prompt and what was cut of its files, core memory, the skills layer (None: none or off)."""
Skills = Callable[[], str | None]
KeptSkills = Callable[[], tuple[str | None] | None]


async def turn_files(
    system_prompt: SystemPrompt,
    core_memory: CoreMemory,
    skills: Skills | None,
    kept_skills: KeptSkills | None,
    budget: int,
    tools_tokens: int,
) -> Read:
    """The three for a context of `budget` tokens whose tools take `tools_tokens`: as last read when none
    changed, else read on a worker thread in one hop (`skills` None: no skills layer; `kept_skills` None: the
    skills are read at every turn)."""
    kept = _kept(system_prompt, core_memory, skills, kept_skills, budget, tools_tokens)
    if kept is not None:
        return kept
    return await asyncio.to_thread(_read, system_prompt, core_memory, skills, budget, tools_tokens)


def _kept(
    system_prompt: SystemPrompt,
    core_memory: CoreMemory,
    skills: Skills | None,
    kept_skills: KeptSkills | None,
    budget: int,
    tools_tokens: int,
) -> Read | None:
    """What each read last, if none changed since (`stat` calls only, on the calling thread)."""
    layer: str | None = None
    if skills is not None:
        try:
            kept_layer = None if kept_skills is None else kept_skills()
        except Exception:  # the hop reads them, and says why they are left out if they are
            return None
        if kept_layer is None:
            return None
        layer = kept_layer[0]
    prompt = system_prompt.kept(budget, tools_tokens)
    if prompt is None:
        return None
    memory = core_memory.kept()
    return None if memory is None else (prompt, memory, layer)


def _read(
    system_prompt: SystemPrompt, core_memory: CoreMemory, skills: Skills | None, budget: int, tools_tokens: int
) -> Read:
    """All three read on the calling thread (a worker's: small files checked or read)."""
    return system_prompt.read(budget, tools_tokens), core_memory.read_now(), _skills_layer(skills)


def _skills_layer(skills: Skills | None) -> str | None:
    """The skills layer, or None when reading the skills fails: files a model can write must not
    fail the turn (the kind of failure is logged, no file content)."""
    if skills is None:
        return None
    try:
        return skills()
    except Exception as exc:  # any failure of the layer leaves the layer out, not the turn
        log.warning("skills layer left out of this turn: reading the skills failed (%s)", type(exc).__name__)
        return None
