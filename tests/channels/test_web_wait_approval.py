"""A script waiting on `POST /api/messages?wait=` for a reply that an approval question holds up.

The real `klaw serve` with `file_write` held for approval and the fake OpenAI server in this process. The
wait ends as soon as the question is asked, the answer naming the tool, its id and what to send; the
script approves as told. A second question is left to time out while the person sends another message:
that reply's tools still say `file_write (denied)` in the history (before: `[]`), and a later turn's model
reads the call's real result (before: that no result was recorded because klaw stopped, as the message
sent meanwhile is stored between the call and its result).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from klaw.engine.transcript import UNKNOWN_RESULT
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.llm.stand_in import stand_in_reply
from tests.engine import short_socket_dir
from tests.serve_helpers import STARTS_WITHIN, running, serve_config, serve_env, stop, web_page, write_serve_home

APPROVAL_SECONDS = 5


async def post(client: httpx.AsyncClient, text: str, wait: int = 120) -> dict[str, Any]:
    answer = await client.post(f"/api/messages?wait={wait}", json={"text": text}, timeout=wait + STARTS_WITHIN)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


async def test_a_wait_held_up_by_an_approval_says_so_and_a_timed_out_call_is_marked_denied() -> None:
    with short_socket_dir() as directory:
        home = directory / "home"
        async with FakeOpenAiServer() as model:
            tools = {"approval": ["file_write"], "approvalTimeoutSeconds": APPROVAL_SECONDS}
            write_serve_home(home, serve_config(model.base_url, tools=tools))
            (home / "workspace").mkdir(mode=0o700)  # as `klaw init` makes it: file_write writes there
            async with running(env=serve_env(home), stderr=asyncio.subprocess.DEVNULL) as serve:
                url = await web_page(serve)
                token = (home / "web_token").read_text(encoding="utf-8").strip()
                async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}) as client:
                    model.reply_tool_calls([("file_write", {"path": "yes.txt", "content": "approved"})])
                    model.reply_text("Wrote yes.txt.")
                    # Before, `reply: null` after the whole wait, and nothing said why.
                    held = await post(client, "write yes.txt")
                    assert held["reply"] is None
                    [question] = held["approvals"]
                    assert question["tool"] == "file_write" and "path: yes.txt" in question["text"]
                    request = question["id"]
                    note = held["note"]
                    assert f"file_write (request {request})" in note
                    assert f'{{"text": "/approve {request}"}}' in note and f'{{"text": "/deny {request}"}}' in note
                    # the script does as the note says
                    approved = await post(client, f"/approve {request}")
                    assert approved["reply"]["text"] == "Approved: file_write runs now."
                    # newcomer23: the reply the approval let go on came in this wait too, not by polling (525)
                    assert approved["unblocked"]["kind"] == "reply"
                    assert approved["unblocked"]["text"] == "Wrote yes.txt."
                    assert approved["unblocked"]["tools"] == ["file_write"]
                    assert "approvals" not in approved

                    # Left to time out, while the person sends another message meanwhile.
                    model.reply_tool_calls([("file_write", {"path": "no.txt", "content": "never"})])
                    model.reply_text("I could not write no.txt.")
                    model.reply_text("Still here.")
                    held = await post(client, "write no.txt")
                    assert held["reply"] is None and held["approvals"][0]["tool"] == "file_write"
                    meanwhile = await post(client, "are you there?", wait=APPROVAL_SECONDS + 120)
                    assert meanwhile["reply"]["text"] == "Still here."
                    assert (home / "workspace" / "yes.txt").read_text(encoding="utf-8") == "approved"
                    assert not (home / "workspace" / "no.txt").exists()
                    model.reply_text("You are welcome.")
                    assert (await post(client, "thanks"))["reply"]["text"] == "You are welcome."
                    history = (await client.get("/api/history")).json()["messages"]
                    replies = {m["text"]: m.get("tools") for m in history if m["role"] == "assistant"}
                    assert replies == {
                        "Wrote yes.txt.": ["file_write"],
                        "I could not write no.txt.": ["file_write (denied)"],
                        "Still here.": [],
                        "You are welcome.": [],
                    }
                # A later turn's model reads the timed-out call's real result, right after the call.
                asked = model.chat_requests[-1].body["messages"]
                calls = [n for n, m in enumerate(asked) if m["role"] == "assistant" and m.get("tool_calls")]
                after = asked[calls[-1] + 1]
                assert after["role"] == "tool" and "did not approve file_write" in after["content"]
                assert UNKNOWN_RESULT not in json.dumps(asked)
                assert await stop(serve) == 0


async def test_approving_a_subagents_question_waits_for_its_runs_answer() -> None:
    """The stand-in model's `!tool` convention, as newcomer23 typed it: the page's chat spawns a subagent whose
    file_write is asked of the page (decision 525); `/approve ID` with `wait` returns the run's answer too."""
    with short_socket_dir() as directory:
        home = directory / "home"
        async with FakeOpenAiServer(default_reply=stand_in_reply) as model:
            write_serve_home(home, serve_config(model.base_url, tools={"approval": ["file_write"]}))
            (home / "workspace").mkdir(mode=0o700)
            async with running(env=serve_env(home), stderr=asyncio.subprocess.DEVNULL) as serve:
                url = await web_page(serve)
                token = (home / "web_token").read_text(encoding="utf-8").strip()
                async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}) as client:
                    inner = "!file_write " + json.dumps({"path": "sub.txt", "content": "x"})
                    await post(client, "!subagent_spawn " + json.dumps({"task_name": "held", "message": inner}))
                    for _ in range(600):  # the run asks on its own, after the spawn's reply (or before it)
                        if waiting := (await client.get("/api/approvals")).json()["approvals"]:
                            break
                        await asyncio.sleep(0.1)
                    [question] = waiting
                    assert question["task"] == "held" and question["text"].startswith("The subagent 'held'")
                    approved = await post(client, f"/approve {question['id']}")
                    assert approved["reply"]["text"] == "Approved: file_write runs now."
                    assert approved["unblocked"]["task"] == "held"
                    assert approved["unblocked"]["text"].startswith("The tool answered: ")
                    assert (home / "workspace" / "sub.txt").read_text(encoding="utf-8") == "x"
                assert await stop(serve) == 0
