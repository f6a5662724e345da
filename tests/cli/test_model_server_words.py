"""What `klaw chat` says about a model server it cannot use, as a newcomer's trial met it: the same
words at start-up and when a turn fails, and a wrong baseUrl refused before the first message."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.cli.test_chat_terminal import chat_env, init_home
from tests.cli.test_cli import klaw


def _closed_port() -> int:
    """A port nothing listens on (bound, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_turn_that_cannot_reach_the_server_says_why_in_the_start_up_checks_words(tmp_path: Path) -> None:
    """Before, the failed turn said "could not reach the server after 1 attempt(s): ConnectError"
    while the start-up check said what that means."""
    home = tmp_path / "home"
    init_home(home)
    env = chat_env(home, f"http://127.0.0.1:{_closed_port()}/v1")
    checked = klaw(home, "chat", env=env, stdin="hello")
    turned = klaw(home, "chat", "--skip-check", env=env, stdin="hello")
    words = "connection refused (nothing listens at that address and port)"
    assert checked.returncode == 2 and words in " ".join(checked.stderr.split()), checked.stderr
    said = " ".join((turned.stdout + turned.stderr).split())
    assert turned.returncode == 1, said
    assert f"could not reach the server after 1 attempt(s): {words}" in said
    assert "ConnectError" not in said and "Traceback" not in said
