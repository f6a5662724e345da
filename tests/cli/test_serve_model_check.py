"""`klaw serve` and `klaw engine` with a model that does not answer (a container's default Ollama address):
they start, as a service must (the model may come up later), but say so in one line at once, with the words
`klaw chat` refuses with, instead of leaving it to the first message's "could not reach the server"."""

from __future__ import annotations

import pytest

from tests.engine import short_socket_dir
from tests.serve_helpers import read_until, running, serve_config, serve_env, stop, write_serve_home


@pytest.mark.parametrize("command", ["serve", "engine"])
async def test_a_service_names_an_unreachable_model_at_start_and_runs_on(command: str) -> None:
    with short_socket_dir() as directory:
        home = write_serve_home(directory / "home", serve_config("http://127.0.0.1:9/v1"))
        async with running("-m", "klaw", command, env=serve_env(home)) as process:
            said = await read_until(process.stderr, "goes on", who=f"klaw {command}")
            assert "no model server answered at http://127.0.0.1:9/v1" in said
            assert f"(routing.default = fake/small in {home / 'engine.yaml'})" in said
            assert f"klaw {command} goes on: chats are answered once the model answers." in said
            assert "ollama pull" not in said  # one line, not chat's whole refusal
            assert process.returncode is None
            if command == "serve":
                await read_until(process.stdout, "web page:")
            elif "klaw engine listening on" not in said:  # the warning may come first or after
                await read_until(process.stderr, "klaw engine listening on", who="klaw engine")
            assert await stop(process) == 0
