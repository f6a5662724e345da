"""LoCoMo's per-session annotations: the session summaries and the observations.

Both were written by gpt-3.5-turbo from each session (bench/data/README.md), which makes them the
closest thing the data has to klaw's own summaries: `session_summary` stands in for a final segment
summary, `observation` (short third-person facts, each naming the turn it comes from) for exchange
summaries. Only `klaw bench past-sessions` uses them; the turn-retrieval bench ignores them.

A file may leave them out (a session without a summary is simply not a past segment with a
summary); what is there must have the right shape, or the error names the key, never the text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from klaw.bench.locomo.dataset import LocomoDataset, LocomoFormatError, normalise_evidence

_SUMMARY_KEY = re.compile(r"^session_(\d+)_summary$")
_OBSERVATION_KEY = re.compile(r"^session_(\d+)_observation$")


@dataclass(frozen=True, slots=True)
class Fact:
    """One observation: a sentence about the session and the turn it comes from."""

    text: str
    dia_id: str


@dataclass(frozen=True, slots=True)
class SessionNotes:
    """A conversation's annotations by session number (sessions with turns only)."""

    summaries: Mapping[int, str]
    facts: Mapping[int, tuple[Fact, ...]]


def load_session_notes(path: Path, dataset: LocomoDataset) -> dict[str, SessionNotes]:
    """The annotations of every conversation of `dataset` (read from the same file), by sample id."""
    try:
        data = json.loads(path.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise LocomoFormatError(f"{path.name}: not JSON ({exc})") from None
    return parse_session_notes(data, dataset)


def parse_session_notes(data: Any, dataset: LocomoDataset) -> dict[str, SessionNotes]:
    items = (
        {item.get("sample_id"): item for item in data if isinstance(item, Mapping)} if isinstance(data, list) else {}
    )
    notes: dict[str, SessionNotes] = {}
    for conversation in dataset.conversations:
        where = f"{dataset.source.name}: {conversation.sample_id}"
        item = items.get(conversation.sample_id)
        if item is None:
            raise LocomoFormatError(f"{where}: not in the file")
        numbers = {session.number for session in conversation.sessions}
        turns = {turn.dia_id: turn.session for turn in conversation.turns}
        notes[conversation.sample_id] = SessionNotes(
            _summaries(item.get("session_summary"), numbers, where),
            _facts(item.get("observation"), numbers, turns, where),
        )
    return notes


def _summaries(raw: Any, numbers: set[int], where: str) -> dict[int, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise LocomoFormatError(f"{where}: 'session_summary' must be an object")
    found: dict[int, str] = {}
    for key, text in raw.items():
        match = _SUMMARY_KEY.match(key)
        if match is None or int(match.group(1)) not in numbers:
            continue  # a summary of a session without turns
        if not isinstance(text, str):
            raise LocomoFormatError(f"{where}: session_summary.{key} must be a string, got {type(text).__name__}")
        if text.strip():
            found[int(match.group(1))] = text.strip()
    return found


def _facts(raw: Any, numbers: set[int], turns: Mapping[str, int], where: str) -> dict[int, tuple[Fact, ...]]:
    """Facts by session; a fact is kept with the first turn it names that exists in its session."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise LocomoFormatError(f"{where}: 'observation' must be an object")
    found: dict[int, tuple[Fact, ...]] = {}
    for key, by_speaker in raw.items():
        match = _OBSERVATION_KEY.match(key)
        if match is None or int(match.group(1)) not in numbers:
            continue
        number = int(match.group(1))
        if not isinstance(by_speaker, Mapping):
            raise LocomoFormatError(f"{where}: observation.{key} must be an object of speakers")
        facts: list[Fact] = []
        for speaker_position, entries in enumerate(by_speaker.values()):
            if not isinstance(entries, list):
                raise LocomoFormatError(f"{where}: observation.{key}[{speaker_position}] must be a list")
            for position, entry in enumerate(entries):
                if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)):
                    raise LocomoFormatError(
                        f"{where}: observation.{key}[{speaker_position}][{position}] must be [text, evidence]"
                    )
                evidence = entry[1] if isinstance(entry[1], list) else [entry[1]]
                valid, _ = normalise_evidence(evidence, turns)
                in_session = [dia_id for dia_id in valid if turns[dia_id] == number]
                if in_session and entry[0].strip():
                    facts.append(Fact(entry[0].strip(), in_session[0]))
        found[number] = tuple(facts)
    return found
