"""A search naming one of the people a pasted transcript quotes ranks that person's own lines first
(memory/speaker_weight.py, decision 255), through the library as a person would use it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from klaw import ChatMessage, FunctionModel, Klaw, ManualClock
from klaw.llm.function_model import AgentInfo
from klaw.memory.speaker_weight import named_speaker, speaker_factor, speaker_of

CONFIG = "embedder:\n  backend: fake\n  dim: 32\nsummarizer:\n  enabled: false\n"
# A group chat pasted line by line: Jon talks about the dance studio more, and in more of its words.
JON = [
    "Jon: The dance studio got a new floor, the dance studio looks great now.",
    "Jon: I spent the whole day at the dance studio painting the dance studio walls.",
    "Jon: The dance studio opens next week, the dance studio needs students.",
]
GINA = "Gina: The place needs brighter lights for the evening dance classes."
# Gina says much else, so her name alone tells full text little (as a speaker's name in a transcript).
GINA_CHAT = [
    "Gina: Sounds like hard work!",
    "Gina: Good morning, the coffee machine is fixed.",
    "Gina: My cat knocked the plant over again.",
    "Gina: The train was late twice this week.",
    "Gina: I finished the novel about the lighthouse keeper.",
]
QUESTION = "What did Gina say about the dance studio?"


async def searched(home: Path, speaker_weight: float | None) -> list[str]:
    def model(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        return "noted"

    setting = "" if speaker_weight is None else f"search:\n  speakerWeight: {speaker_weight}\n"
    home.mkdir()
    (home / "engine.yaml").write_text(CONFIG + setting, encoding="utf-8")
    async with Klaw(home, model=FunctionModel(model), clock=ManualClock()) as agent:
        for text in [JON[0], GINA, JON[1], *GINA_CHAT[:3], JON[2], *GINA_CHAT[3:]]:
            await agent.ask("bob", text)
        await agent.engine.embedding_queue.wait_idle()
        return [hit.text for hit in await agent.search_memory("bob", QUESTION, limit=5)]


async def test_the_named_speakers_line_moves_up(tmp_path: Path) -> None:
    """By words and meaning Jon's three lines about "the dance studio" outrank Gina's one; the
    question asks what Gina said, so her line moves up into the first three (first with
    `speakerWeight: 1`); with the step off it is fourth."""
    default = await searched(tmp_path / "default", None)
    assert GINA in default[:3]  # among the three auto-RAG shows (`autoRag.topK`)
    off = await searched(tmp_path / "off", 0)
    assert GINA not in off[:3] and off.index(GINA) > default.index(GINA)
    assert (await searched(tmp_path / "strong", 1))[0] == GINA


@pytest.mark.parametrize(
    ("text", "speaker"),
    [
        ("Melanie: we went camping", "Melanie"),
        ("  Anna Maria: hi", "Anna Maria"),
        ("I said: no", None),  # a lowercase opening is a sentence, not a name
        ("no name here", None),
        ("Melanie went camping: it rained", None),  # more than three words before the colon
    ],
)
def test_who_says_a_line(text: str, speaker: str | None) -> None:
    assert speaker_of(text) == speaker


def test_a_text_naming_none_or_two_speakers_changes_nothing() -> None:
    speakers = {"Jon", "Gina", None}
    assert named_speaker("What did Gina say?", speakers) == "Gina"
    assert named_speaker("What did Gina's brother say?", speakers) == "Gina"
    assert named_speaker("What do Jon and Gina both like?", speakers) is None
    assert named_speaker("What did Jonathan say?", speakers) is None  # whole words only
    assert named_speaker("what did gina say?", speakers) is None  # as written: "Note: …" is not "a note"
    assert speaker_factor(1.5, "Gina", speaker_of(GINA)) == 2.5
    assert speaker_factor(1.5, "Gina", speaker_of(JON[0])) == 1.0
    assert speaker_factor(0.0, "Gina", "Gina") == 1.0
    assert speaker_factor(1.5, None, None) == 1.0
