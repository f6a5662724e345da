"""A folder of the home made unreadable while klaw runs (chmod 000) is named with the fix: a chat's
conversations folder refuses that chat's message in words (`ask` raised a bare PermissionError; the socket's
refusal said "could not handle this inbound (PermissionError; see its log)", decision 473) and the
workspace fails every turn naming it (it was "something went wrong"); given back, the chats are answered
(adversary26; decision 466). Root reads a chmod 000 folder, so as root the library runs in a child process
without the capabilities that let it (setpriv): the permission checks of an ordinary user."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.test_library import CONFIG

SCRIPT = textwrap.dedent(
    """
    import asyncio, json, os, sys
    from klaw import FunctionModel, Klaw, TurnFailed

    async def main(home):
        said = {}
        async with Klaw(home, config=CONFIG, model=FunctionModel(lambda m, i: "ok"), listen=True) as agent:
            await agent.ask("a", "hello")
            os.chmod(os.path.join(home, "conversations"), 0)  # a web message through the socket, a new chat's
            reader, writer = await asyncio.open_unix_connection(os.path.join(home, "engine.sock"))
            frame = {"type": "inbound", "id": "w1", "channel": "web", "chat_id": "main", "text": "hi"}
            writer.write(b'{"type":"hello","channels":["web"]}\\n' + json.dumps(frame).encode() + b"\\n")
            said["socket"] = json.loads(await reader.readline())
            writer.close()
            os.chmod(os.path.join(home, "conversations"), 0o700)
            cases = [("conversations", "conversations/library_a", "a"), ("workspace", "workspace", "b")]
            for name, folder, chat in cases:
                os.chmod(os.path.join(home, folder), 0)
                try:
                    said[name] = await agent.ask(chat, "again")
                except TurnFailed as failed:
                    said[name] = str(failed)
                os.chmod(os.path.join(home, folder), 0o700)
            said["after"] = await agent.ask("a", "back?")
        print(json.dumps(said))

    asyncio.run(main(sys.argv[1]))
    """
)


def test_a_folder_made_unreadable_mid_run_is_named_with_the_fix(tmp_path: Path) -> None:
    as_user: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: cannot drop the capability to read any folder")
        as_user = ["setpriv", "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search,-fowner"]
    home = tmp_path / "home"
    done = subprocess.run(
        [*as_user, sys.executable, "-c", f"CONFIG = {CONFIG!r}\n" + SCRIPT, str(home)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout.splitlines()[-1])
    folder = home / "conversations" / "library_a"
    assert said["conversations"] == (  # was a bare PermissionError naming a .jsonl file
        f"Sorry, I could not take this message (it was not saved): klaw may not open {folder}: permission denied."
        f" Give it back to the user klaw runs as (chmod 700 {folder}, as klaw makes its folders; chown if it"
        " changed owner), then send it again."
    )
    workspace = home / "workspace"  # was "Sorry, something went wrong and I could not answer (error …)"
    assert said["workspace"].startswith(f"Sorry, I could not answer: klaw may not open {workspace}: permission")
    assert f"(chmod 700 {workspace}, as klaw makes its folders" in said["workspace"]
    assert "then send your message again. (error " in said["workspace"]
    assert said["after"] == "ok"
    conversations = home / "conversations"  # was "the engine could not handle this inbound (PermissionError; …)"
    assert said["socket"] == {
        "type": "error",
        "code": "refused",
        "ref": "w1",
        "message": f"this message was not stored: klaw may not open {conversations}: permission denied. Give it back"
        f" to the user klaw runs as (chmod 700 {conversations}, as klaw makes its folders; chown if it changed"
        " owner), then send it again.",
    }, said["socket"]
