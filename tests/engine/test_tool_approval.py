"""Approval of held tools end to end through the engine's socket: a gateway's person is asked, answers
`/approve ID` or `/deny ID` as ordinary chat text while the turn that asked still holds the chat, or does
not answer (the manual clock passes the timeout); a scheduled task's run has nobody to ask and may use
a held tool only if its task was created allowing it (which the person approves in turn)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from klaw.engine.clock import ManualClock
from klaw.engine.frames import (
    AckFrame,
    EngineFrame,
    GatewayFrame,
    HelloFrame,
    InboundFrame,
    OutboundFrame,
    QueryFrame,
    ResultFrame,
)
from klaw.engine.runtime import Engine
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.store.log_format import decode_record
from klaw.store.records import ChatRef
from tests.engine import GatewayClient, short_socket_dir
from tests.engine.harness import engine_config

WEB = ChatRef("web", "main")
TIMEOUT = 120.0
COMMAND = "rm -rf ~/old-backups && echo `date`"
QUESTION_ID = re.compile(r"/approve ([0-9a-f]{4}) or /deny \1")


@dataclass
class Stand:
    engine: Engine
    server: FakeOpenAiServer
    clock: ManualClock
    gateway: GatewayClient
    home: KlawHome
    ran: list[str] = field(default_factory=list)  # host_exec's commands, as it received them
    sent: int = 0
    stopped: bool = False
    early: list[OutboundFrame] = field(default_factory=list)  # outbound frames read while waiting for an ack

    async def send(self, text: str) -> str:
        """A person's message through the gateway, acknowledged (stored, or a command answered)."""
        self.sent += 1
        frame_id = f"m{self.sent}"
        await self.gateway.send(InboundFrame(id=frame_id, channel=WEB.channel, chat_id=WEB.chat_id, text=text))
        await self.acked(frame_id)
        return frame_id

    async def acked(self, frame_id: str) -> None:
        while (frame := await self.gateway.recv()) != AckFrame(id=frame_id):
            assert isinstance(frame, OutboundFrame), frame
            self.early.append(frame)

    async def outbound(self) -> OutboundFrame:
        """The next outbound frame, skipping acks."""
        if self.early:
            return self.early.pop(0)
        while True:
            frame = await self.gateway.recv()
            if isinstance(frame, OutboundFrame):
                return frame
            assert isinstance(frame, AckFrame), frame

    async def ask(self, text: str) -> str:
        """Send a message and let its debounce pass: its turn starts."""
        frame_id = await self.send(text)
        await self.clock.advance(self.engine.config.processing.debounce_ms / 1000)
        return frame_id

    async def question(self) -> tuple[str, OutboundFrame]:
        frame = await self.outbound()
        found = QUESTION_ID.search(frame.text)
        assert found is not None, frame.text
        return found.group(1), frame

    def tool_results(self) -> list[dict[str, Any]]:
        """Every tool result the model was sent, in its last request."""
        return [m for m in self.server.chat_requests[-1].body["messages"] if m["role"] == "tool"]

    def logged_tool_results(self, directory: str = "web_main") -> list[dict[str, Any]]:
        records = []
        for path in sorted((self.home.conversations / directory).glob("*.jsonl")):
            for line in path.read_text().splitlines():
                record = decode_record(line)
                if record.metadata and "tool_call_id" in record.metadata:
                    records.append({"content": record.content, **record.metadata})
        return records


@asynccontextmanager
async def stand(processing: dict[str, Any] | None = None, **tools: Any) -> AsyncIterator[Stand]:
    """An engine on a socket with `host_exec` (a recording stand-in) held for approval, a gateway serving `web`."""
    settings = {"approval": ["host_exec"], "approvalTimeoutSeconds": TIMEOUT, **tools}
    with short_socket_dir() as root:
        home = KlawHome(root / "home")
        initialise_home(home)
        async with FakeOpenAiServer() as server:
            clock = ManualClock()
            ran: list[str] = []

            async def host_exec(command: str) -> str:
                """Run a command on the host."""
                ran.append(command)
                return f"ran: {command}"

            config = engine_config(
                server.base_url, tools=settings, scheduler={"timezone": "UTC"}, processing=processing or {}
            )
            engine = await Engine.start(home, config, clock=clock, tools=[host_exec])
            gateway = await GatewayClient.connect(home.socket_path)
            the_stand = Stand(engine, server, clock, gateway, home, ran)
            try:
                await gateway.send(HelloFrame(channels=["web"]))
                yield the_stand
            finally:
                await gateway.aclose()
                if not the_stand.stopped:
                    await engine.shutdown(timeout_seconds=5)


def replies(frames: list[GatewayFrame | EngineFrame]) -> list[OutboundFrame]:
    return [f for f in frames if isinstance(f, OutboundFrame)]


async def test_approved_the_call_runs_and_the_model_reads_its_result(tmp_path: Path) -> None:
    async with stand() as s:
        s.server.reply_tool_calls([("host_exec", {"command": COMMAND})])
        s.server.reply_text("Cleaned up.")
        asked = await s.ask("clean up my old backups")

        request_id, question = await s.question()
        # The question shows the command literally, in a code block.
        assert (question.channel, question.chat_id, question.kind) == ("web", "main", "notice")
        assert question.approval == request_id
        assert question.text == (
            f"The agent wants to run host_exec:\n```\ncommand: {COMMAND}\n```\n"
            f"/approve {request_id} or /deny {request_id} (no answer within 2 minutes means no)"
        )
        assert s.ran == []  # held

        # The answer is ordinary chat text from the same gateway while the turn still holds the chat.
        answer = await s.send(f"/approve {request_id}")
        notice = await s.outbound()
        assert (notice.reply_to, notice.kind, notice.text) == (answer, "notice", "Approved: host_exec runs now.")
        reply = await s.outbound()
        assert (reply.reply_to, reply.text) == (asked, "Cleaned up.")

        assert s.ran == [COMMAND]
        [result] = s.tool_results()
        assert result["content"] == f"ran: {COMMAND}"
        [logged] = s.logged_tool_results()
        assert (logged["approval"], logged["is_error"]) == ("approved", False)


async def test_a_question_shown_again_says_the_time_left_not_the_whole_timeout(tmp_path: Path) -> None:
    """fh9: the `approvals` query (a web page reloaded while a question waits) gave the question as asked,
    "no answer within 2 minutes", however long it had waited; it says the time left, rounded down."""
    async with stand() as s:
        s.server.reply_tool_calls([("host_exec", {"command": COMMAND})])
        s.server.reply_text("Cleaned up.")
        await s.ask("clean up my old backups")
        request_id, question = await s.question()
        await s.clock.wait_for_sleeper(TIMEOUT)
        await s.clock.advance(29.5)
        await s.gateway.send(QueryFrame(id="q1", query="approvals", params={"channel": "web", "chat_id": "main"}))
        answer = await s.gateway.recv()
        assert isinstance(answer, ResultFrame), answer
        [shown] = answer.data["approvals"]
        assert shown["text"] == question.text.replace(
            "(no answer within 2 minutes means no)", "(no answer in the 1 minute 30 seconds left means no)"
        )
        await s.clock.advance(TIMEOUT - 29.5 - 1)  # a second before the end: never "0 seconds"
        await s.gateway.send(QueryFrame(id="q2", query="approvals", params={"channel": "web", "chat_id": "main"}))
        answer = await s.gateway.recv()
        assert isinstance(answer, ResultFrame), answer
        [shown] = answer.data["approvals"]
        assert shown["text"].endswith(f"/deny {request_id} (no answer in the 1 second left means no)")


async def test_denied_the_call_never_runs_and_the_model_is_told(tmp_path: Path) -> None:
    async with stand() as s:
        s.server.reply_tool_calls([("host_exec", {"command": COMMAND})])
        s.server.reply_text("Understood, I left them.")
        await s.ask("clean up my old backups")
        request_id, _ = await s.question()

        await s.send(f"/DENY {request_id.upper()}")  # case does not matter
        assert (await s.outbound()).text == "Denied: host_exec will not run."
        reply = await s.outbound()
        assert reply.text == "Understood, I left them."
        assert reply.tools == ("host_exec (denied)",)  # before: "host_exec", as if it had run

        assert s.ran == []
        [result] = s.tool_results()
        assert result["content"].startswith("Not run: the person denied host_exec.")
        [logged] = s.logged_tool_results()
        assert (logged["approval"], logged["is_error"]) == ("denied", True)


async def test_no_answer_within_the_timeout_is_a_denial(tmp_path: Path) -> None:
    async with stand() as s:
        s.server.reply_tool_calls([("host_exec", {"command": COMMAND})])
        s.server.reply_text("No answer, so I did nothing.")
        await s.ask("clean up my old backups")
        request_id, question = await s.question()
        assert "no answer within 2 minutes means no" in question.text

        await s.clock.wait_for_sleeper(TIMEOUT)
        await s.clock.advance(TIMEOUT - 1)
        assert s.engine.approvals.waiting(WEB) == [request_id]  # not yet
        assert await over(s, request_id) is None  # what an attached klaw chat's y/N prompt asks (decision 450)
        await s.clock.advance(1)
        reply = await s.outbound()
        assert (reply.text, reply.tools) == ("No answer, so I did nothing.", ("host_exec (denied)",))
        assert await over(s, request_id) == "No answer within 2 minutes: host_exec was not run."
        assert await over(s, request_id, ChatRef("console", "someone")) == (  # another chat's: not named
            f"Question {request_id} no longer waits for an answer: it was answered elsewhere or timed out, or the"
            " engine that asked it has restarted since."
        )

        assert s.ran == []
        [result] = s.tool_results()
        assert result["content"] == "Not run: the person did not approve host_exec within 2 minutes, so it was denied."
        assert s.logged_tool_results()[0]["approval"] == "timed_out"
        # A late answer finds nothing waiting and says so.
        await s.send(f"/approve {request_id}")
        late = await s.outbound()
        # Said once: not followed by "No approval request is waiting in this chat." as well.
        assert (
            late.text
            == f"No approval request '{request_id}' is waiting in this chat (answered, timed out, or never asked)."
        )
        assert s.ran == []


async def over(s: Stand, request_id: str, chat: ChatRef = WEB) -> str | None:
    """The `approval_over` query's answer: None while the question waits, else how it ended."""
    params = {"channel": chat.channel, "chat_id": chat.chat_id, "id": request_id}
    await s.gateway.send(QueryFrame(id=f"over-{request_id}", query="approval_over", params=params))
    answer = await s.gateway.recv()
    assert isinstance(answer, ResultFrame) and answer.error is None, answer
    return answer.data["over"]  # type: ignore[no-any-return]


async def test_an_unknown_id_or_another_chats_answer_approves_nothing(tmp_path: Path) -> None:
    async with stand() as s:
        s.server.reply_tool_calls([("host_exec", {"command": COMMAND})])
        s.server.reply_text("Done.")
        await s.ask("clean up my old backups")
        request_id, _ = await s.question()
        other_id = "0000" if request_id != "0000" else "ffff"

        await s.send(f"/approve {other_id}")
        unknown = await s.outbound()
        assert unknown.text == (
            f"No approval request '{other_id}' is waiting in this chat (answered, timed out, or never asked)."
            f" Waiting: {request_id}. Answer /approve ID."
        )
        # A chat that may be another person's (Telegram) cannot answer for this one (the owner's may: 525).
        await s.gateway.send(HelloFrame(channels=["web", "telegram"]))
        await s.gateway.send(InboundFrame(id="other", channel="telegram", chat_id="42", text=f"/approve {request_id}"))
        await s.acked("other")
        assert (await s.outbound()).text.startswith(f"No approval request '{request_id}' is waiting in this chat")
        assert s.ran == [] and s.engine.approvals.waiting(WEB) == [request_id]
        await s.send("/status")
        status = (await s.outbound()).text
        assert f"Held for approval: host_exec; waiting here: {request_id} (host_exec)" in status

        await s.send("/approve")  # one question waits: no id needed
        assert (await s.outbound()).text == "Approved: host_exec runs now."
        assert (await s.outbound()).text == "Done."
        assert s.ran == [COMMAND]


async def run_task(s: Stand, name: str, runs_before: int) -> None:
    """Move the clock to the task's next fire time and wait until that run has finished."""
    scheduler = s.engine.scheduler
    assert scheduler is not None
    async with asyncio.timeout(30):
        await scheduler.wait_asleep()
        task = next(t for t in await scheduler.list_tasks() if t.name == name)
        assert task.next_run_at is not None
        await s.clock.advance((task.next_run_at - s.clock.now()).total_seconds())
        await scheduler.runner.wait_for_completed(runs_before + 1)


async def test_a_task_run_is_denied_a_held_tool_unless_its_task_was_created_allowing_it(tmp_path: Path) -> None:
    async with stand() as s:
        # A task created without allowing host_exec: schedule_add is not held, nobody is asked.
        s.server.reply_tool_calls([("schedule_add", {"name": "plain", "every": "1h", "message": "tidy up"})])
        s.server.reply_text("Scheduled.")
        await s.ask("tidy up every hour")
        assert (await s.outbound()).text == "Scheduled."

        s.server.reply_tool_calls([("host_exec", {"command": COMMAND})])
        s.server.reply_text("Could not tidy up.")
        await run_task(s, "plain", 0)
        assert s.ran == []
        assert (await s.outbound()).text == "Could not tidy up."  # the run's answer; no question came before it
        [refused] = s.logged_tool_results("scheduler_plain")
        assert refused["approval"] == "no_person"
        assert refused["content"].startswith("Not run: host_exec needs the person's approval, and a scheduled task")
        scheduler = s.engine.scheduler
        assert scheduler is not None
        await scheduler.remove_task("plain")  # it would fire with the next one

        # Allowing host_exec to a task is itself asked of the person, who approves.
        arguments = {"name": "tidy", "every": "1h", "message": "tidy up", "allow_tools": ["host_exec"]}
        s.server.reply_tool_calls([("schedule_add", arguments)])
        s.server.reply_text("Scheduled, with host_exec.")
        await s.ask("tidy up every hour, you may run commands")
        request_id, question = await s.question()
        assert "The agent wants to run schedule_add:" in question.text and 'allow_tools: ["host_exec"]' in question.text
        # What a yes grants, in plain words under the arguments (newcomer23, decision 525)
        assert question.text.endswith(
            "```\nIf you approve, the task 'tidy' will run host_exec every 1h without asking you.\n"
            f"/approve {request_id} or /deny {request_id} (no answer within 2 minutes means no)"
        ), question.text
        await s.send(f"/approve {request_id}")
        assert (await s.outbound()).text == "Approved: schedule_add runs now."
        assert (await s.outbound()).text == "Scheduled, with host_exec."
        tidy = next(t for t in await scheduler.list_tasks() if t.name == "tidy")
        assert tidy.allowed_tools == ("host_exec",)

        s.server.reply_tool_calls([("host_exec", {"command": COMMAND})])
        s.server.reply_text("Tidied.")
        await run_task(s, "tidy", 1)
        assert s.ran == [COMMAND]  # without a question: the reply is the next frame
        assert (await s.outbound()).text == "Tidied."
        [allowed] = s.logged_tool_results("scheduler_tidy")
        assert (allowed["approval"], allowed["content"]) == ("approved", f"ran: {COMMAND}")


async def test_a_denied_allow_tools_creates_no_task(tmp_path: Path) -> None:
    async with stand() as s:
        arguments = {"name": "tidy", "every": "1h", "message": "tidy up", "allow_tools": ["host_exec"]}
        s.server.reply_tool_calls([("schedule_add", arguments)])
        s.server.reply_text("Not scheduled.")
        await s.ask("tidy up every hour, you may run commands")
        request_id, _ = await s.question()
        await s.send(f"/deny {request_id}")
        assert (await s.outbound()).text == "Denied: schedule_add will not run."
        assert (await s.outbound()).text == "Not scheduled."
        scheduler = s.engine.scheduler
        assert scheduler is not None
        assert await scheduler.list_tasks() == []


async def test_shutdown_cuts_a_turn_waiting_for_its_question_and_the_model_is_not_asked_again(tmp_path: Path) -> None:
    """A model that keeps asking for the held call is not asked again while klaw stops: it was called round after
    round up to maxToolCallRounds while klaw waited to stop (adversary25 L3, decision 454). The turn is cut at its
    question, as at the drain's deadline: nothing is written for it, and the next start answers the message again
    and asks again (decision 513: tests/engine/test_question_open_at_a_stop.py)."""
    async with stand() as s:
        for _ in range(3):
            s.server.reply_tool_calls([("host_exec", {"command": COMMAND})])
        await s.ask("clean up my old backups")
        await s.question()
        s.stopped = True
        async with asyncio.timeout(60):  # the drain would otherwise wait for the answer (or its 600 s limit)
            await s.engine.shutdown(timeout_seconds=600)
        assert s.ran == [] and len(s.server.chat_requests) == 1
        assert s.logged_tool_results() == []
        assert not [r for r in map(decode_record, log_lines(s.home)) if r.content.startswith("klaw is stop")]


async def test_the_question_and_answers_never_reach_the_python_log(tmp_path: Path, caplog: Any) -> None:
    caplog.set_level("DEBUG")
    async with stand() as s:
        s.server.reply_tool_calls([("host_exec", {"command": COMMAND})])
        s.server.reply_text("Cleaned up.")
        await s.ask("clean up my old backups")
        request_id, _ = await s.question()
        await s.send(f"/approve {request_id}")
        await s.outbound()
        await s.outbound()
    decisions = [r.getMessage() for r in caplog.records if r.name == "klaw.engine.approval"]
    assert f"approval {request_id}: host_exec in web:main approved" in decisions
    assert not any("backups" in r.getMessage() for r in caplog.records)
    assert json.dumps(COMMAND) not in caplog.text


async def test_other_chats_are_answered_while_a_question_waits_with_one_llm_slot(tmp_path: Path) -> None:
    async with stand(processing={"maxConcurrentLlm": 1}) as s:
        s.server.reply_tool_calls([("host_exec", {"command": COMMAND})])
        s.server.reply_text("Answered the guest meanwhile.")
        s.server.reply_text("Cleaned up.")
        await s.ask("clean up my old backups")
        request_id, _ = await s.question()

        # No LLM slot is held while the person is asked (decision 297): another chat's turn gets the only one.
        await s.gateway.send(InboundFrame(id="g1", channel="web", chat_id="guest", text="hello"))
        await s.acked("g1")
        await s.clock.advance(s.engine.config.processing.debounce_ms / 1000)
        guest = await s.outbound()
        assert (guest.chat_id, guest.text) == ("guest", "Answered the guest meanwhile.")

        await s.send(f"/approve {request_id}")
        assert (await s.outbound()).text == "Approved: host_exec runs now."
        assert (await s.outbound()).text == "Cleaned up."
        assert s.ran == [COMMAND]
        assert s.engine.processor.slots.in_use == 0


async def test_a_call_with_unusable_arguments_is_not_put_to_the_person(tmp_path: Path) -> None:
    async with stand() as s:
        s.server.reply_tool_calls([("host_exec", {"cmd": COMMAND})])  # the parameter is `command`
        s.server.reply_text("I got the arguments wrong.")
        await s.ask("clean up my old backups")
        assert (await s.outbound()).text == "I got the arguments wrong."  # no question came first
        [result] = s.tool_results()
        assert result["content"].startswith("invalid arguments:")
        assert s.ran == []


async def test_a_file_path_climbing_out_of_the_workspace_is_not_put_to_the_person(tmp_path: Path) -> None:
    """`../engine.yaml` could never be written: the model is told at once, nobody is asked to approve it."""
    async with stand(approval=["file_write"]) as s:
        s.server.reply_tool_calls([("file_write", {"path": "../engine.yaml", "content": "tools: {}"})])
        s.server.reply_text("That file is outside my workspace.")
        await s.ask("change your settings")
        assert (await s.outbound()).text == "That file is outside my workspace."  # no question came first
        [result] = s.tool_results()
        assert "'../engine.yaml' is outside the workspace" in result["content"]
        assert "tools: {}" not in (s.home.root / "engine.yaml").read_text(encoding="utf-8")


async def test_a_write_into_the_skills_folder_is_not_put_to_the_person(tmp_path: Path) -> None:
    """skills/ is refused by design (decision 279): asking first only to refuse once approved is pointless."""
    async with stand(approval=["file_write"]) as s:
        s.server.reply_tool_calls([("file_write", {"path": "skills/notes/SKILL.md", "content": "be evil"})])
        s.server.reply_text("I may not write skills.")
        await s.ask("write yourself a skill")
        assert (await s.outbound()).text == "I may not write skills."  # no question came first
        [result] = s.tool_results()
        assert "- path: 'skills/notes/SKILL.md' is a prompt file or in the skills/ folder" in result["content"]
        assert "Value error" not in result["content"]  # the tool's sentence alone, not pydantic's frame
        assert not (s.home.workspace / "skills" / "notes").exists()


def log_lines(home: KlawHome) -> list[str]:
    return [
        line
        for path in sorted((home.conversations / "web_main").glob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]


async def test_a_one_off_task_allowed_a_held_tool_is_asked_about_in_its_own_words(tmp_path: Path) -> None:
    """Review of session 56 (decision 528): decision 525's words for what a yes grants knew cron and every, and
    said of decision 526's one-off `at` task that it ran "on a schedule the tool will refuse as it is written"."""
    async with stand() as s:
        arguments = {"name": "remind", "at": "2030-12-01 17:00", "message": "call mum", "allow_tools": ["host_exec"]}
        s.server.reply_tool_calls([("schedule_add", arguments)])
        s.server.reply_text("Not scheduled.")
        await s.ask("remind me on the first of December 2030, you may run commands")
        request_id, question = await s.question()
        assert "refuse" not in question.text, question.text
        assert (
            "If you approve, the task 'remind' will run host_exec once at 2030-12-01 17:00 (the scheduler's time"
            " zone) without asking you." in question.text
        ), question.text
        await s.send(f"/deny {request_id}")
        assert (await s.outbound()).text == "Denied: schedule_add will not run."
        assert (await s.outbound()).text == "Not scheduled."
