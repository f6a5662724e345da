"""`klaw chat` with the stand-in model configured and not running says how to start it, and only that
(newcomer20, decision 490): it added 12 lines of Ollama and hosted-model setup, the stand-in's command last."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from tests.cli.chat_terminal import chat_env, chat_without_a_terminal, closed_port, init_home


def test_the_stand_in_down_is_told_how_to_start_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    port = closed_port()
    env = {k: v for k, v in chat_env(home, "unused").items() if not k.startswith(("KLAW__MODELS", "KLAW__ROUTING"))}
    # what the stand-in's banner says to put in place of engine.yaml's models: and routing: sections
    config = (home / "engine.yaml").read_text(encoding="utf-8")
    head, rest = config.split("\nmodels:", 1)
    stand_in = (
        f"models:\n  stand-in/echo:\n    baseUrl: http://127.0.0.1:{port}/v1\nrouting:\n  default: stand-in/echo\n"
    )
    (home / "engine.yaml").write_text(
        f"{head}\n{stand_in}processing:{rest.split('processing:', 1)[1]}", encoding="utf-8"
    )
    result = chat_without_a_terminal(env)
    assert result.returncode == 2
    words = " ".join(result.stderr.split())
    assert "No model server answered at http://127.0.0.1:" in words
    start = (
        f"Start the stand-in model in another terminal: {shlex.quote(sys.executable)} -m klaw.llm.fake_server {port}"
    )
    assert start in words, result.stderr
    assert "ollama" not in words.lower() and "Traceback" not in words
