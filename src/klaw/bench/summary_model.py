"""The in-process model of `klaw bench summaries`: scripted chat replies, and a summarizer that keeps
exactly the key words of what it reads.

A summary's quality cannot be judged by a benchmark, but what reaches the summaries can: this model
answers a summary request with the codes its input holds ("LK-0417"), the words a real summary must
keep, so a code missing from the summaries means the pipeline dropped it (never summarized, clipped
away, lost in a batch), not that the model wrote badly. An exchange summary is about as long as a
real one (one word in eight of the exchange, 8 to 40 words), since the segment's rolling follows
the summaries' tokens. It recognises the requests by their
instructions (`memory/summaries/prompts.py`) and counts each kind.

`klaw bench turn` answers through the fake OpenAI server with the same summaries (`wire_reply`): a
model that ignored the batch prompt's numbered lines would make the summarizer ask every exchange
again alone, and the bench would time a misbehaving model rather than the engine.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from klaw.bench.summary_script import ScriptedTurn
from klaw.llm.fake_wire import Reply, TextReply, echo_last_user_message
from klaw.llm.function_model import AgentInfo
from klaw.llm.messages import ChatMessage
from klaw.memory.summaries import prompts

CODE = re.compile(r"\b[A-Z]{2,4}-\d{4}\b")
_NUMBERED = re.compile(r"^### Exchange (\d+)$", re.MULTILINE)


def codes(text: str) -> list[str]:
    """The key words of `text`, in order, each once."""
    return list(dict.fromkeys(CODE.findall(text)))


class BenchModel:
    """A `FunctionModel` function: chat turns get their scripted reply, summary requests a summary
    of key words. `calls` counts requests by kind ("chat", "exchange", "exchanges", "segment")."""

    def __init__(self, script: Sequence[ScriptedTurn]) -> None:
        self._replies = {turn.text: turn.reply for turn in script}
        self.calls: Counter[str] = Counter()

    def __call__(self, messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        system = messages[0].content if messages and messages[0].role == "system" else ""
        last = messages[-1].content or "" if messages else ""
        kind = summary_kind(system or "")
        self.calls[kind] += 1
        answer = summary_answer(kind, last)
        return self._reply(last) if answer is None else answer

    @property
    def background(self) -> int:
        """Summary requests so far."""
        return sum(n for kind, n in self.calls.items() if kind != "chat")

    def _reply(self, text: str) -> str:
        stripped = text.strip()
        if stripped in self._replies:
            return self._replies[stripped]
        for asked, reply in self._replies.items():  # a burst joins several messages into one
            if stripped.endswith(asked):
                return reply
        return "Okay."


def wire_reply(body: Mapping[str, Any]) -> Reply:
    """`FakeOpenAiServer.default_reply` of a model that follows the summary prompts: a summary request
    gets `summary_answer`, anything else the server's usual echo."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    system = str(messages[0].get("content") or "") if messages and messages[0].get("role") == "system" else ""
    last = str(messages[-1].get("content") or "") if messages else ""
    answer = summary_answer(summary_kind(system), last)
    return echo_last_user_message(body) if answer is None else TextReply(answer)


def summary_kind(system: str) -> str:
    """Which request a system prompt makes: "exchange", "exchanges" (a numbered batch), "segment" or "chat"."""
    if system == prompts.EXCHANGE_INSTRUCTIONS:
        return "exchange"
    if system == prompts.BATCH_INSTRUCTIONS:
        return "exchanges"
    if system == prompts.SEGMENT_INSTRUCTIONS:
        return "segment"
    return "chat"


def summary_answer(kind: str, last: str) -> str | None:
    """What a model following the summary prompts answers to the request's last message (`last`); None
    for a chat turn. A batch gets one numbered line per exchange, as `BATCH_INSTRUCTIONS` asks."""
    if kind == "exchange":
        return "Summary: " + _summary(last)
    if kind == "exchanges":
        parts = _NUMBERED.split(last)[1:]  # number, text, number, text …
        return "\n".join(f"{n}. {_summary(text)}" for n, text in zip(parts[::2], parts[1::2], strict=True))
    if kind == "segment":
        found = codes(last)
        return "Topics so far: " + ", ".join(found) + "." if found else "A general conversation."
    return None


def _summary(exchange: str) -> str:
    """Its codes, then words of the exchange up to a real summary's length."""
    words = exchange.replace("The person wrote:", "").replace("The assistant's final reply:", "").split()
    keys = codes(exchange)
    length = min(max(len(words) // 8, 8), 40)
    start = "The person mentioned " + ", ".join(keys) + ": " if keys else "The person wrote: "
    return start + " ".join(words[:length]) + "."
