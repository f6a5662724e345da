"""`klaw serve` out of open files: a flood of connections to the web page makes its accept fail with
EMFILE; the log gets one line saying what to do, no traceback, and once the flood goes the page answers.

The real `klaw serve` with a low open-files limit (as a small `ulimit -n` or systemd's LimitNOFILE),
on asyncio's own event loop (as where uvloop is not installed: uvloop's libuv drops such connections
without asking the loop's exception handler); the model is the fake OpenAI server in this process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import signal
import sys

import httpx
import yaml

from klaw.llm.fake_server import FakeOpenAiServer
from tests.engine import short_socket_dir

OPEN_FILES = 160  # room for klaw serve's own files and sockets, not for the flood
FLOOD = 400
WITHOUT_UVLOOP = (
    "import runpy, sys; sys.modules['uvloop'] = None; sys.argv = ['klaw', 'serve'];"
    " runpy.run_module('klaw', run_name='__main__')"
)


def low_open_files_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))


async def test_out_of_open_files_is_one_line_and_the_page_comes_back() -> None:
    with short_socket_dir() as directory:
        home = directory / "home"
        home.mkdir()
        async with FakeOpenAiServer() as model:
            config = {
                "models": {"fake/small": {"baseUrl": model.base_url, "contextBudget": 4000, "maxRetries": 0}},
                "routing": {"default": "fake/small"},
                "embedder": {"backend": "fake", "dim": 32},
                "summarizer": {"enabled": False},
                "channels": {"web": {"port": 0}},
            }
            (home / "engine.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
            env = {**os.environ, "KLAW_HOME": str(home), "PYTHONUNBUFFERED": "1"}
            serve = await asyncio.create_subprocess_exec(
                sys.executable, "-c", WITHOUT_UVLOOP, env=env, preexec_fn=low_open_files_limit,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            assert serve.stdout is not None and serve.stderr is not None
            stderr = serve.stderr
            said: list[bytes] = []
            full = asyncio.Event()  # the line about open files was logged

            async def read_log() -> None:  # always read: a full pipe would stall klaw's event loop
                while line := await stderr.readline():
                    said.append(line)
                    if b"Too many open files" in line:
                        full.set()

            reading = asyncio.create_task(read_log())
            flood: list[asyncio.StreamWriter] = []
            try:
                async with asyncio.timeout(60):
                    while not (line := (await serve.stdout.readline()).decode()).startswith("web page:"):
                        assert line, "klaw serve exited early"
                url = line.split()[-1]
                host, port = url.removeprefix("http://").rstrip("/").split(":")
                for _ in range(FLOOD):  # the kernel's backlog takes them; klaw cannot accept them all
                    with contextlib.suppress(OSError):
                        flood.append((await asyncio.open_connection(host, int(port)))[1])
                async with asyncio.timeout(30):
                    await full.wait()
                for writer in flood:
                    writer.close()
                async with httpx.AsyncClient(base_url=url) as browser, asyncio.timeout(30):
                    while True:  # klaw accepts again a moment after the flood goes
                        with contextlib.suppress(httpx.HTTPError):
                            if (await browser.get("/login", timeout=5)).status_code == 200:
                                break
                        await asyncio.sleep(0.05)
            finally:
                for writer in flood:
                    writer.close()
                with contextlib.suppress(ProcessLookupError):
                    serve.send_signal(signal.SIGTERM)
                try:
                    async with asyncio.timeout(30):
                        await serve.wait()
                except TimeoutError:
                    serve.kill()
                    await serve.wait()
                await reading
    log = b"".join(said)
    assert b"Traceback" not in log
    assert log.count(b"Too many open files") == 1, log.decode()[-3000:]
    assert b"raise the open-files limit" in log


FAILING_TASKS = """
import asyncio, errno, gc, logging
from klaw import event_loop

async def load_vectors():
    raise OSError(errno.ENOMEM, "Cannot allocate memory")

async def open_the_store():
    raise OSError(errno.EMFILE, "Too many open files")

async def main():
    for job in (load_vectors, open_the_store):
        task = asyncio.get_running_loop().create_task(job(), name=job.__name__)
        await asyncio.sleep(0.01)
        del task
        gc.collect()

logging.basicConfig()
event_loop.run(main())
"""


async def test_a_task_failing_out_of_memory_or_files_keeps_its_traceback_and_name() -> None:
    """Only a listener's failed accept is the one-line report: a background task that fails with ENOMEM or
    EMFILE is logged by the loop's default handler, each with its traceback and task name, and nothing
    advises `ulimit -n` for it. On uvloop and on asyncio's own loop."""
    for prelude in ("", "import sys; sys.modules['uvloop'] = None\n"):
        run = await asyncio.create_subprocess_exec(
            sys.executable, "-c", prelude + FAILING_TASKS, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        _, stderr = await run.communicate()
        log = stderr.decode()
        assert run.returncode == 0, log
        assert log.count("Traceback") == 2, log
        assert "ModuleNotFoundError" not in log, log
        assert "load_vectors" in log and "Cannot allocate memory" in log, log
        assert "open_the_store" in log and "Too many open files" in log, log
        assert "ulimit" not in log, log
