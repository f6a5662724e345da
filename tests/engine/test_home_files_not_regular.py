"""A small file of klaw's in the home that is not a regular file (a FIFO, a symlink to /dev/zero) or not JSON
as klaw writes it (nested deeper than Python's recursion limit) is refused in words naming it, never waited on
or read without end (adversary25 L1, L2; decision 453): approvals-open.json at start (the start goes on),
engine.yaml under a running engine's `/status` (the whole engine froze on it) and at start (it hung), core
memory on a turn (the turn waited), web_revoked.json when the web page's sign-in is made, web_token when
`klaw serve` starts (it hung), web_address when `klaw chat` looks for the page a gateway serves (decision 466).

Each FIFO has a writer armed to open it after 10 s: code that waits on the FIFO is released then and fails
the test on its words, instead of hanging it; code that does not wait leaves nothing for it to open."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from klaw import FunctionModel, Klaw
from klaw.channels.web.auth import WebAuth
from klaw.channels.web.token import load_or_create_token
from klaw.errors import KlawError
from klaw.home import KlawHome
from klaw.served_page import served_page
from tests.test_library import CONFIG

ENGINE_YAML = "embedder:\n  backend: fake\n  dim: 32\nsummarizer:\n  enabled: false\nprocessing:\n  debounceMs: 0\n"


@contextlib.contextmanager
def fifo(path: Path) -> Iterator[list[str]]:
    """`path` made a FIFO, released by a writer after 10 s if something waits on it (the list yielded then
    says so: something waited)."""
    os.mkfifo(path)
    waited: list[str] = []

    def release() -> None:
        with contextlib.suppress(OSError):  # ENXIO: nobody reads it, as it should be
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            waited.append(str(path))

    timer = threading.Timer(10, release)
    timer.start()
    try:
        yield waited
    finally:
        timer.cancel()


def home_with(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A new home folder, and the path of its file `name` (not made)."""
    home = tmp_path / "home"
    home.mkdir()
    return home, home / name


async def test_a_hand_made_open_questions_note_is_named_and_the_start_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home, note = home_with(tmp_path, "approvals-open.json")
    model = FunctionModel(lambda messages, info: "ok")
    cases = [
        # was a RecursionError stopping the start
        ("deep", "not valid JSON klaw can read (a number too long or nesting too deep)"),
        ("fifo", "not a regular file but a FIFO (named pipe)"),  # was a start hung for ever
        ("zero", "not a regular file but a device"),  # was memory eaten without end
    ]
    for kind, why in cases:
        note.unlink(missing_ok=True)
        caplog.clear()
        with contextlib.ExitStack() as stack:
            if kind == "deep":
                note.write_text("[" * 200_000 + "]" * 200_000)
            elif kind == "fifo":
                stack.enter_context(fifo(note))
            else:
                note.symlink_to("/dev/zero")
            with caplog.at_level(logging.WARNING, "klaw.engine.open_questions"):
                async with Klaw(home, config=CONFIG, model=model) as klaw:
                    assert await klaw.ask("alice", "hello") == "ok"
        assert f"{note} cannot be read ({why}); it is ignored" in caplog.text, (kind, caplog.text)
        assert "Remove it" in caplog.text


async def test_engine_yaml_or_core_memory_made_a_fifo_or_dev_zero_is_said_unreadable_not_waited_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home, config_file = home_with(tmp_path, "engine.yaml")
    config_file.write_text(ENGINE_YAML)
    core = home / "core_memory.json"
    async with Klaw(home, model=FunctionModel(lambda messages, info: "ok")) as klaw:
        with fifo(core), caplog.at_level(logging.WARNING, "klaw.memory.core_memory"):
            assert await klaw.ask("alice", "hello") == "ok"  # the turn waited on the FIFO
        assert f"core memory {core} cannot be read (not a regular file but a FIFO (named pipe))" in caplog.text
        core.unlink()
        core.symlink_to("/dev/zero")
        with caplog.at_level(logging.WARNING, "klaw.memory.core_memory"):
            assert await klaw.ask("alice", "hello") == "ok"  # was read without end
        said = f"core memory {core} cannot be read (not a regular file but a device); it is treated as empty"
        assert said in caplog.text
        core.unlink()

        config_file.unlink()
        with fifo(config_file):
            status = await klaw.ask("alice", "/status")  # the whole engine waited on the FIFO here
        said = f"{config_file} cannot be read (not a regular file but a FIFO (named pipe)); a restart would fail"
        assert said in status, status
        config_file.unlink()
        config_file.symlink_to("/dev/zero")  # was read without end
        assert "(not a regular file but a device)" in await klaw.ask("alice", "/status")
        config_file.unlink()
        config_file.write_text(ENGINE_YAML)
        assert "cannot be read" not in await klaw.ask("alice", "/status")  # the file back: nothing to say

    config_file.unlink()
    with fifo(config_file), pytest.raises(KlawError, match="FIFO"):  # the start hung on it
        async with Klaw(home, model=FunctionModel(lambda messages, info: "ok")):
            pass


def test_the_web_pages_sign_out_list_made_a_fifo_or_dev_zero_is_forgotten_in_words(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    revoked = tmp_path / "web_revoked.json"
    with fifo(revoked), caplog.at_level(logging.WARNING, "klaw.channels.web.revoked"):
        WebAuth("a-token-long-enough-to-be-one", revoked_file=revoked)  # the web channel's start waited here
    assert f"{revoked} cannot be read (not a regular file but a FIFO (named pipe)); earlier sign-outs" in caplog.text
    revoked.unlink()
    revoked.symlink_to("/dev/zero")
    with caplog.at_level(logging.WARNING, "klaw.channels.web.revoked"):
        WebAuth("a-token-long-enough-to-be-one", revoked_file=revoked)  # was read without end
    assert "(not a regular file but a device)" in caplog.text


def test_the_web_pages_token_file_made_a_fifo_or_dev_zero_stops_the_start_in_words(tmp_path: Path) -> None:
    """`klaw serve` and `klaw mcp serve --http` read it first thing: a FIFO hung them, /dev/zero filled memory."""
    home = KlawHome(tmp_path / "home")
    home.root.mkdir(mode=0o700)
    cases = [("fifo", "not a regular file but a FIFO (named pipe)"), ("zero", "not a regular file but a device")]
    for kind, why in cases:
        home.web_token_file.unlink(missing_ok=True)
        with contextlib.ExitStack() as stack:
            if kind == "fifo":
                stack.enter_context(fifo(home.web_token_file))
            else:
                home.web_token_file.symlink_to("/dev/zero")
            with pytest.raises(OSError, match=r"\(the web page's token\) cannot be read") as refused:
                load_or_create_token(home)
        assert f"({why}); remove it and start again" in str(refused.value)


async def test_the_web_pages_address_file_made_a_fifo_is_not_waited_on(tmp_path: Path) -> None:
    """`klaw chat` beside a running engine reads it to name the page: a FIFO there hung it (read_text)."""
    home = KlawHome(tmp_path / "home")
    home.root.mkdir(mode=0o700)
    with fifo(home.web_address_file) as waited:
        assert await served_page(home) is None
    assert waited == []  # the old code waited on it until the writer came
