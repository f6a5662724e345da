"""An approved call whose note cannot be taken out of approvals-open.json (a full disk) does not run: a kill
after it ran would have left the note saying it never was approved, and the restarted engine would have told
the model so, inviting it to make a payment twice (adversary25 M1, decision 453). The person's /approve is
answered with why; the model reads the same as the call's result; after a restart nothing says "never approved".

A real full file system: a tmpfs of the test's own whose inodes run out while the question waits, so the note
(replaced whole through a new file) cannot be rewritten, while the log's appends to files already there go on."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from klaw import AgentInfo, ChatMessage, ChatRef, ChatResponse, FunctionModel, Klaw, call_tool, tool_calls
from tests.own_disk import fill_inodes, tmpfs
from tests.test_library import CONFIG


async def test_an_approval_that_cannot_be_recorded_does_not_run_its_call_and_says_why(tmp_path: Path) -> None:
    config = {**CONFIG, "tools": {"approval": ["pay"]}, "processing": {"debounceMs": 0}}
    paid: list[int] = []
    told: list[str] = []
    said: list[str] = []

    async def pay(amount: int) -> str:
        """Pay someone (not idempotent)."""
        paid.append(amount)
        return "paid"

    def model(messages: Sequence[ChatMessage], info: AgentInfo) -> ChatResponse | str:
        results = [str(m.content) for m in messages if m.role == "tool"]
        if messages[-1].role == "user" and messages[-1].content == "pay the plumber":
            return tool_calls(call_tool("pay", {"amount": 100}))
        told.extend(results)
        return "ok"

    with tmpfs(tmp_path / "disk", "16m", inodes=600) as disk:
        home = disk / "home"
        fillers: list[Path] = []

        async def approve(chat: ChatRef, question: str) -> bool:
            fillers.extend(fill_inodes(disk))  # the disk fills while the question waits
            (request,) = klaw.engine.approvals.waiting(chat)
            said.append(await klaw.engine.commands.handle(chat, "approve", request))  # as the person types it
            return True

        async with Klaw(home, config=config, model=FunctionModel(model), tools=[pay], approve=approve) as klaw:
            assert await klaw.ask("alice", "pay the plumber") == "ok"
        assert paid == []  # was [100]: it ran, and the note still said it was open
        assert said and said[0].startswith("Not run: klaw could not record the approval of pay"), said
        assert told and "Not run: klaw could not record the approval of pay" in told[-1], told
        for filler in fillers:
            filler.unlink()

        told.clear()
        async with Klaw(home, config=config, model=FunctionModel(model)) as klaw:
            assert await klaw.ask("alice", "so was it paid?") == "ok"
        assert not any("(it was never approved)" in text for text in told), told
        assert any("could not record the approval of pay" in text for text in told), told
