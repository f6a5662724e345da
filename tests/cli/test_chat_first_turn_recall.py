"""The first message after `klaw chat` starts searches past conversations with the local model's vectors,
without a warning (decision 260).

The local embedder (MiniLM, the default) loads on its first call: 1.8-5.6 s at a load of 8 on this
machine, the calls after it 0.03 s. The first turn's query embedding paid that load against
`embedder.queryTimeoutSeconds` (2 s), so about half the starts printed "(klaw logged a warning: see
…/logs/chat.log)" under the first reply: "past-conversation retrieval failed (EmbedderError)". The
engine now loads the model at start, on its thread, and a query waits for that load before its own
deadline runs. Here the deadline is 0.25 s, far above one inference (0.03 s) and below any load seen:
the new code has a wide margin; the old one fails unless leftover work happened to start the load
early (see below). Real processes and the real model.
"""

from __future__ import annotations

from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import chat_env, init_home
from tests.cli.piped_chat import piped


async def test_the_first_turn_after_start_recalls_by_vectors_without_a_warning(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = {
            **chat_env(home, model.base_url),
            "KLAW__EMBEDDER__BACKEND": "minilm",  # the default, real model: it loads on its first call
            "KLAW__EMBEDDER__QUERYTIMEOUTSECONDS": "0.25",
            "KLAW__SUMMARIZER__ENABLED": "true",  # a past conversation needs its summary to be recalled
        }
        del env["KLAW__EMBEDDER__DIM"]
        model.reply_text("Miso is a fine name.")
        code, _, err = await piped(env, "I adopted a cat called Miso")
        assert code == 0, err
        code, out, err = await piped(env, "/new")  # the conversation above becomes a past one
        assert code == 0 and "new conversation" in out, err

        # A new process, its first turn. The embedding queue is off here: with it on, vectors the runs
        # above left to make start the load at once, an accidental warm-up. The summarizer stays on (past
        # conversations are recalled only with it), and work it left can still do the same: so the old
        # code fails this test in most runs, not all (2 of 3 here), as it warned at 4 of ~12 starts.
        env["KLAW__EMBEDDER__PIPELINEENABLED"] = "false"
        code, out, err = await piped(env, "what is my cat called?")
        assert (code, out) == (0, "echo: what is my cat called?\n"), err
        assert "klaw logged a warning" not in err
        logged = (
            (home / "logs" / "chat.log").read_text(encoding="utf-8") if (home / "logs" / "chat.log").exists() else ""
        )
        assert "retrieval failed" not in logged and "EmbedderError" not in logged, logged
