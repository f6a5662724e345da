"""What a command loads before it does its job: a person waits for every library imported at start
(decision 316). `klaw --help` reads no config and runs no model; a piped `klaw chat` draws no prompt, so
neither loads what those need. Asserted on the modules the real command line holds when it exits, never
on a time (timings are `klaw bench`'s and the decision's)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from klaw.llm.fake_server import FakeOpenAiServer
from klaw.store.sqlite.store import SqliteStore
from tests.cli.chat_terminal import chat_env, init_home
from tests.cli.piped_chat import CHAT_SECONDS
from tests.engine import short_socket_dir
from tests.serve_helpers import running, serve_config, serve_env, stop, web_page, write_serve_home

# The `klaw` script's own entry point, with the names of the modules loaded written out as the process exits.
PROGRAM = """
import atexit, json, sys
names = sys.argv[1]
atexit.register(lambda: open(names, "w").write(json.dumps(sorted(sys.modules))))
sys.argv = ["klaw", *sys.argv[2:]]
from klaw.cli import main
main()
"""


async def run_probe(program: str, out: Path, env: dict[str, str], args: tuple[str, ...], stdin: str) -> Any:
    """Run `program` (the `klaw` entry point with a probe that writes JSON to `out` as it exits) with
    `args`; it must succeed. Returns what it wrote. The fake model, if any, answers from this event loop."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        program,
        str(out),
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    _, err = await asyncio.wait_for(process.communicate(stdin.encode()), timeout=CHAT_SECONDS)
    assert process.returncode == 0, err.decode()
    return json.loads(out.read_text(encoding="utf-8"))


async def loaded(tmp_path: Path, env: dict[str, str], *args: str, stdin: str = "") -> set[str]:
    """The modules `klaw args…` had loaded when it exited (it must succeed)."""
    names = await run_probe(PROGRAM, tmp_path / "modules.json", env, args, stdin)
    return {name.split(".")[0] for name in names}


async def test_help_loads_no_config_models_embedder_or_prompt(tmp_path: Path) -> None:
    modules = await loaded(tmp_path, chat_env(tmp_path / "home", "http://127.0.0.1:9/v1"), "--help")
    heavy = {"pydantic", "yaml", "numpy", "onnxruntime", "tokenizers", "prompt_toolkit", "httpx", "mcp"}
    assert "klaw" in modules and not modules & heavy, modules


async def test_a_piped_chat_loads_no_prompt_and_no_markdown_parser(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        model.reply_text("**ok**")
        env = {**chat_env(home, model.base_url), "KLAW__TOOLS__ENABLED": "[clock]"}
        modules = await loaded(tmp_path, env, "chat", stdin="hi\n")
    assert "klaw" in modules and not modules & {"prompt_toolkit", "markdown_it"}, modules


async def test_a_chats_engine_loads_only_what_its_config_uses(tmp_path: Path) -> None:
    """No MCP server configured, no Telegram, no web channel, a SQLite store: a chat's engine (the default
    tools) loads neither the MCP SDK (a second of CPU), nor Telegram, the web stack or PostgreSQL's
    driver (decision 378)."""
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        model.reply_text("ok")
        modules = await loaded(tmp_path, chat_env(home, model.base_url), "chat", stdin="hi\n")
    unused = {"mcp", "telegram", "fastapi", "starlette", "uvicorn", "psycopg", "psycopg_pool"}
    assert "klaw" in modules and not modules & unused, modules & unused


async def test_a_piped_exit_starts_no_engine_and_loads_none(tmp_path: Path) -> None:
    """`echo /exit | klaw chat` leaves after the model check (decision 376) without importing the engine
    either: numpy (the store's vectors), the tools and the engine's modules are not loaded (decision 378)."""
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        model.reply_text("ok")
        modules = await loaded(tmp_path, chat_env(home, model.base_url), "chat", stdin="/exit\n")
    heavy = {"numpy", "onnxruntime", "prompt_toolkit"}
    assert "klaw" in modules and not modules & heavy, modules & heavy


async def test_a_local_embedders_cached_graph_is_loaded_without_the_onnx_package(tmp_path: Path) -> None:
    """MiniLM on onnxruntime: the first start builds the ONNX graph with the `onnx` package and keeps it in
    the home; a start that finds it there loads onnxruntime alone (the `onnx` package and protobuf were
    ~0.1 s of every engine's start: decision 411)."""
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        model.reply_text("ok")
        env = {**chat_env(home, model.base_url), "KLAW__EMBEDDER__BACKEND": "minilm"}
        env["KLAW__EMBEDDER__RUNTIME"] = "onnx-fp32"
        # long enough to be embedded: a piped chat loads the model for its vectors, after its reply (499)
        first = await loaded(tmp_path, env, "chat", stdin="the tomatoes in the garden grew tall this summer\n")
        again = await loaded(tmp_path, env, "chat", stdin="the basil beside the tomatoes did well this summer too\n")
    assert "onnx" in first  # built the graph: the test reaches the path it means to
    assert "onnxruntime" in again and "onnx" not in again, again & {"onnx", "google"}


async def test_serve_without_telegram_loads_no_telegram_library(tmp_path: Path) -> None:
    """`klaw serve` with the web page alone (Telegram off, as `klaw init` writes it) never loads
    python-telegram-bot (~0.2 s of its start: decision 411); the modules are read as it exits on SIGTERM."""
    names = tmp_path / "modules.json"
    with short_socket_dir() as directory:
        home = write_serve_home(directory / "home", serve_config("http://127.0.0.1:9/v1"))
        async with running("-c", PROGRAM, str(names), "serve", env=serve_env(home)) as process:
            await web_page(process)
            assert await stop(process) == 0
    modules = {name.split(".")[0] for name in json.loads(names.read_text(encoding="utf-8"))}
    assert "klaw" in modules and "uvicorn" in modules and "telegram" not in modules, modules & {"telegram"}


async def a_home_with_a_database(tmp_path: Path) -> dict[str, str]:
    """An inited home whose klaw.db an engine has opened, and the environment of a command on it (the fake
    embedder, a model on a port nothing answers: neither command here calls it)."""
    home = tmp_path / "home"
    init_home(home)
    await (await SqliteStore.open(home / "klaw.db")).aclose()
    return chat_env(home, "http://127.0.0.1:9/v1")


async def test_reading_the_database_loads_no_numpy(tmp_path: Path) -> None:
    """`klaw db info` opens the store and reads no vector: no numpy (~0.2 s of a start), which the store's
    modules and sqlite-vec's own `__init__` imported at the top (decision 437)."""
    modules = await loaded(tmp_path, await a_home_with_a_database(tmp_path), "db", "info")
    assert "klaw" in modules and "apsw" in modules and "numpy" not in modules, modules & {"numpy"}


async def test_config_check_loads_neither_numpy_nor_httpx(tmp_path: Path) -> None:
    """`klaw config check` opens the store, builds the embedder, asks every routed model's key and lists every
    tool group, and calls nothing: no numpy, no httpx (the web tools make their client at their first call;
    the key check lives beside the endpoint, not in the model check: decision 437)."""
    modules = await loaded(tmp_path, await a_home_with_a_database(tmp_path), "config", "check")
    assert "klaw" in modules and "apsw" in modules and not modules & {"numpy", "httpx"}, modules & {"numpy", "httpx"}


async def test_a_piped_chat_beside_a_running_serve_loads_no_http_client_numpy_or_engine(tmp_path: Path) -> None:
    """`echo hi | klaw chat` beside `klaw serve` talks over engine.sock and makes no model check of its own:
    it loaded the check's module (httpx, h11, httpcore, and the click and pygments httpx's own command line
    pulls in) before it knew it would attach (decision 520)."""
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = {**chat_env(home, model.base_url), "KLAW__CHANNELS__WEB__PORT": "0"}
        async with running(env=env, stderr=None) as serve:
            await web_page(serve)
            model.reply_text("an answer for the pipe")
            names = set(await run_probe(PROGRAM, tmp_path / "modules.json", env, ("chat",), "hello from a pipe\n"))
            assert await stop(serve) == 0
    modules = {name.split(".")[0] for name in names}
    heavy = {"httpx", "httpcore", "h11", "numpy", "onnxruntime", "prompt_toolkit"}
    assert "klaw.channels.console_attached" in names and not modules & heavy, modules & heavy
    assert "klaw.engine.runtime" not in names  # attached: no engine in this process


async def test_importing_the_library_loads_no_numpy(tmp_path: Path) -> None:
    """`from klaw import Klaw` imports the engine's modules, but numpy (~0.2 s) only once a vector is touched:
    the embedding queue, the embed-once cache and past conversations named it for their annotations (520)."""
    program = "import json, sys\nfrom klaw import Klaw\nopen(sys.argv[1], 'w').write(json.dumps(sorted(sys.modules)))"
    out = tmp_path / "modules.json"
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", program, str(out))
    assert await process.wait() == 0
    modules = set(json.loads(out.read_text(encoding="utf-8")))
    assert "klaw.engine.runtime" in modules and "numpy" not in modules, sorted(m for m in modules if "numpy" in m)
