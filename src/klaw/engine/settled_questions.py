"""How each approval question ended, kept a while after, for a prompt that was not where it was answered.

An attached `klaw chat` (decision 430) asks a question with its `approve? [y/N]` prompt, at attach too,
for a question asked before it came (decision 441). The question can end without that prompt: answered
in the chat from elsewhere (another program on the engine's socket speaking for the console), its time
run out, its turn stopped, the engine stopping. The terminal learns it by asking the engine (the
`approval_over` query) while its prompt is up, and ends the prompt with these words; before, the prompt
stayed, and a `y` was told nothing waited (decision 450). Kept in memory only, the last `KEPT`: a
restarted engine holds no question of before, and its words for an id it does not know say so.
"""

from __future__ import annotations

from collections import OrderedDict

from klaw.engine.approval_text import duration_words
from klaw.store.records import ChatRef

KEPT = 256  # questions remembered after they ended: a prompt asks within a second or so of the end


class SettledQuestions:
    """Each ended question's chat, tool and decision (`approval.Decision`'s value; None: its turn ended first)."""

    def __init__(self, timeout_seconds: float) -> None:
        self._timeout = timeout_seconds
        self._ended: OrderedDict[str, tuple[ChatRef, str, str | None]] = OrderedDict()

    def note(self, request_id: str, chat: ChatRef, tool: str, decision: str | None) -> None:
        self._ended[request_id] = (chat, tool, decision)
        while len(self._ended) > KEPT:
            self._ended.popitem(last=False)

    def said(self, chat: ChatRef, request_id: str) -> str:
        """How question `request_id` of `chat` ended, in words for a prompt that did not answer it. Another
        chat's question is not named (its tool is that chat's business): it reads as one not known here."""
        found = self._ended.get(request_id)
        if found is None or found[0] != chat:
            return (
                f"Question {request_id} no longer waits for an answer: it was answered elsewhere or timed out, or"
                " the engine that asked it has restarted since."
            )
        _, tool, decision = found
        if decision == "approved":
            return f"Answered elsewhere, not at this prompt: /approve {request_id}, so {tool} runs."
        if decision == "denied":
            return f"Answered elsewhere, not at this prompt: /deny {request_id}, so {tool} will not run."
        if decision == "unrecorded":  # decision 453
            return f"Approved elsewhere, but {tool} was not run: klaw could not record the approval (disk full?)."
        if decision == "no_terminal":
            return f"{tool} was not run: its question was ended as one no terminal could answer (a piped message)."
        if decision == "no_approver":  # decision 538
            return f"{tool} was not run: the program's approve callback gave no answer (it has none, or it raised)."
        if decision == "timed_out":
            return f"No answer within {duration_words(self._timeout)}: {tool} was not run."
        if decision == "unavailable":
            return f"{tool} was not run: the engine is stopping."
        return f"{tool} was not run: the turn that asked about it ended before an answer came."
