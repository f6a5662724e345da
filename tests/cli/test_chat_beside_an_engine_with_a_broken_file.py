"""engine.yaml broken while an engine runs (check52): `klaw chat` exited 2 with the validation message though
the engine beside it answered on engine.sock and ran on what it had read at its start. Now the chat attaches,
says once that the file is not valid and that it matters at the next start; with no engine to talk to it still
refuses with the message (it would start one on the file as it is now)."""

from __future__ import annotations

import asyncio

import yaml

from klaw import FunctionModel, Klaw
from tests.cli.klaw_here import klaw_here
from tests.engine import short_socket_dir

SETTINGS = {"embedder": {"backend": "fake", "dim": 32}, "summarizer": {"enabled": False}}


async def test_a_chat_attaches_to_the_running_engine_while_engine_yaml_is_broken() -> None:
    with short_socket_dir() as root:
        home = root / "home"
        home.mkdir(mode=0o700)
        config = home / "engine.yaml"
        config.write_text(yaml.safe_dump(SETTINGS), encoding="utf-8")
        async with Klaw(home, model=FunctionModel(lambda _m, _i: "answered by the running engine"), listen=True):
            config.write_text(yaml.safe_dump({**SETTINGS, "processing": {"debounceMs": "fast"}}), encoding="utf-8")
            # in a thread of its own: the engine it attaches to runs on this test's loop
            chat = await asyncio.to_thread(klaw_here, home, "chat", stdin="hello\n")
            said = " ".join(chat.stderr.split())
            assert (chat.returncode, chat.stdout) == (0, "answered by the running engine\n"), said
            assert "which runs on what it read at its start; mend it before klaw next starts" in said, said
            assert "debounceMs" in said and "Traceback" not in said, said

        alone = klaw_here(home, "chat", stdin="hello\n")  # nothing to attach to: the file is what it would run on
        said = " ".join(alone.stderr.split())
        assert alone.returncode == 2 and alone.stdout == "", said
        assert "debounceMs" in said and "mend it before" not in said, said
