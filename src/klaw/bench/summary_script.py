"""The scripted conversation of `klaw bench summaries`: a fixed mix of turns a person really sends.

Two hundred turns (by default) drawn with a fixed seed from four kinds, in about the shares a
personal chat has: small talk ("hi", "thanks!", "ok cool"), a fact to remember ("my locker code is
LK-0417"), a short question ("any idea for a cat's name?") and a long exchange (a plan of a few
hundred words and a long answer). Every fact and long exchange carries one code written like a
name ("LK-0417"): the words a summary must keep, so coverage can be checked by looking for them.
The model's replies are scripted too, so the run is the same on every machine.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import StrEnum

SEED = 19


class TurnKind(StrEnum):
    SMALL_TALK = "small talk"
    FACT = "fact"
    QUESTION = "question"
    LONG = "long"


@dataclass(frozen=True, slots=True)
class ScriptedTurn:
    kind: TurnKind
    text: str  # what the person sends
    reply: str  # what the model answers
    keyword: str | None  # the code a summary must keep (facts and long exchanges)


# (share of turns, kind): about a quarter small talk, a third facts.
_MIX = ((0.25, TurnKind.SMALL_TALK), (0.35, TurnKind.FACT), (0.25, TurnKind.QUESTION), (0.15, TurnKind.LONG))

_SMALL_TALK = (
    ("hi", "Hello! How are you?"),
    ("thanks!", "You're welcome."),
    ("ok cool", "Glad that helps."),
    ("good morning", "Good morning!"),
    ("haha nice", "Ha, indeed."),
    ("great, thanks", "Any time."),
    ("ok", "Sure."),
    ("yes please", "Okay."),
)
_FACTS = (
    ("LK", "my locker code at the gym is {code}"),
    ("FL", "I'm flying to Porto next month, the booking reference is {code}"),
    ("WF", "the wifi password at my parents' place is {code}"),
    ("VT", "the vet appointment for Miso is under number {code}"),
    ("OR", "my order of the new desk lamp has the number {code}"),
    ("PL", "my car's parking permit is {code}, it expires in spring"),
    ("IN", "the invoice from the plumber is {code}, I still need to pay it"),
)
_QUESTIONS = (
    ("any idea for a cat's name?", "How about Miso or Pepper?"),
    ("how long should I boil an egg?", "About seven minutes for a firm yolk."),
    ("what's a quick lunch I could make?", "A tomato and mozzarella sandwich."),
    ("should I water the basil every day?", "Every two or three days is enough."),
    ("which is warmer, wool or cotton?", "Wool keeps you warmer, even when damp."),
    ("can you suggest a short walk nearby?", "The river path loop takes about forty minutes."),
)
_LONG_TOPICS = ("the garden beds", "the kitchen renovation", "the trip through Norway", "the book club schedule")
_FILLER = (
    "I have been thinking about this for weeks and I want to get the order of the steps right, because"
    " last time we started too early and had to redo half of it. The budget is tight but not impossible,"
    " and my partner wants to be involved in every decision, which slows things down but is fair."
)


def scripted_turns(count: int = 200, seed: int = SEED) -> list[ScriptedTurn]:
    """`count` turns drawn with `seed` (the same list on every run); every code is unique."""
    rng = random.Random(seed)
    turns: list[ScriptedTurn] = []
    for number in range(count):
        kind = _draw(rng)
        code = f"{number:04d}"
        if kind is TurnKind.SMALL_TALK:
            text, reply = rng.choice(_SMALL_TALK)
            turns.append(ScriptedTurn(kind, text, reply, None))
        elif kind is TurnKind.FACT:
            prefix, pattern = rng.choice(_FACTS)
            keyword = f"{prefix}-{code}"
            turns.append(ScriptedTurn(kind, "By the way, " + pattern.format(code=keyword) + ".", "Noted.", keyword))
        elif kind is TurnKind.QUESTION:
            text, reply = rng.choice(_QUESTIONS)
            turns.append(ScriptedTurn(kind, text, reply, None))
        else:
            turns.append(_long_turn(rng.choice(_LONG_TOPICS), f"PLAN-{code}"))
    return turns


def _draw(rng: random.Random) -> TurnKind:
    point = rng.random()
    for share, kind in _MIX:
        if point < share:
            return kind
        point -= share
    return _MIX[-1][1]


def _long_turn(topic: str, keyword: str) -> ScriptedTurn:
    text = f"Let's plan {topic}; I'll call the plan {keyword}. " + " ".join([_FILLER] * 4)
    reply = f"Here is a plan for {topic}. First, list what must happen before anything else can start. " + " ".join(
        ["Then take one step a week, check the budget after each, and keep notes."] * 12
    )
    return ScriptedTurn(TurnKind.LONG, text, reply, keyword)
