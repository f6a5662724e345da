"""A tool's author can say a call of it needs the person's approval (newcomer24 item 11, decision 540): before,
only the person's `tools.approval` could, and a plugin's `read_any`, enabled by a person who did not think to
list it, read a file unasked. A plugin (a real dist-info on the path), a real home and the fake model server."""

from __future__ import annotations

from pathlib import Path

from klaw import ChatRef, Klaw, requires_approval
from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.klaw_here import klaw_here
from tests.serve_helpers import serve_config, write_serve_home
from tests.tools.conftest import install

READER = '''
from pathlib import Path


async def read_any(path: str) -> str:
    """Read any file on the machine.

    Args:
        path: an absolute path
    """
    return Path(path).read_text()


read_any.requires_approval = True  # set by hand: the package does not import klaw
TOOLS = [read_any]
'''


def _config(model_url: str, **tools: object) -> dict[str, object]:
    return serve_config(model_url, channels=None, tools={"enabled": ["clock", "reader"], **tools})


async def _asked(home: Path, model: FakeOpenAiServer, config: dict[str, object], path: Path) -> tuple[str, list[str]]:
    """The reply to a turn whose model calls read_any on `path`, and the questions the program was asked."""
    questions: list[str] = []

    async def approve(chat: ChatRef, question: str) -> bool:
        questions.append(question)
        return False

    model.reply_tool_calls([("read_any", {"path": str(path)})])
    model.reply_text("done")
    async with Klaw(home, config=config, approve=approve) as agent:
        assert await agent.ask("alice", "read it") == "done"
        rows = {row.name: row for row in await agent.tools("alice")}
    sent = model.chat_requests[-1].body["messages"]
    results = [str(message.get("content")) for message in sent if message.get("role") == "tool"]
    assert rows["read_any"].needs_approval is bool(questions)
    return "\n".join(results), questions


async def test_a_plugin_tool_marked_requires_approval_is_asked_about_though_tools_approval_leaves_it_out(
    tmp_path: Path, site: Path
) -> None:
    install(site, "reader", "klaw_reader_marked", READER, "TOOLS")
    secret = tmp_path / "secret.txt"
    secret.write_text("the-secret-words", encoding="utf-8")
    async with FakeOpenAiServer() as model:
        result, questions = await _asked(tmp_path / "home", model, _config(model.base_url), secret)
        assert questions and "read_any" in questions[0], questions  # before: run unasked
        assert "the-secret-words" not in result and "Not run" in result, result

        waived = _config(model.base_url, approvalWaived=["read_any"])  # the person's config says otherwise
        result, questions = await _asked(tmp_path / "home2", model, waived, secret)
        assert not questions and "the-secret-words" in result, result


async def test_a_program_s_own_tool_marked_with_the_decorator_is_held(tmp_path: Path) -> None:
    ran: list[str] = []

    @requires_approval
    async def wipe(what: str) -> str:
        """Wipe something.

        Args:
            what: the thing to wipe
        """
        ran.append(what)
        return "wiped"

    questions: list[str] = []

    async def approve(chat: ChatRef, question: str) -> bool:
        questions.append(question)
        return False

    async with FakeOpenAiServer() as model:
        model.reply_tool_calls([("wipe", {"what": "disk"})])
        model.reply_text("done")
        config = serve_config(model.base_url, channels=None)
        async with Klaw(tmp_path / "home", config=config, tools=[wipe], approve=approve) as agent:
            assert await agent.ask("alice", "wipe it") == "done"
    assert questions and "wipe" in questions[0] and ran == []


def test_klaw_tools_says_a_tool_is_held_by_its_author_s_mark(tmp_path: Path, site: Path) -> None:
    install(site, "reader", "klaw_reader_shown", READER, "TOOLS")
    home = write_serve_home(tmp_path / "home", _config("http://127.0.0.1:9"))
    shown = klaw_here(home, "tools", "read_any", env={"COLUMNS": "400"})
    assert shown.returncode == 0, shown.stderr
    assert "read_any [plugin klaw_reader_shown (reader = klaw_reader_shown:TOOLS)]: offered (each call waits" in (
        shown.stdout
    )
    assert "Approval: each call waits for your /approve (its author marked it requires_approval;" in shown.stdout
