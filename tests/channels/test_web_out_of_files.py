"""`klaw serve` out of open files: a flood of connections to the web page makes its accept fail with
EMFILE; the log gets one line saying what to do, no traceback, and once the flood goes the page answers.

The real `klaw serve` with a low open-files limit (as a small `ulimit -n` or systemd's LimitNOFILE),
on asyncio's own event loop (as where uvloop is not installed: uvloop's libuv drops such connections
without asking the loop's exception handler); the model is the fake OpenAI server in this process.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import sys

import httpx

from klaw.llm.fake_server import FakeOpenAiServer
from tests.engine import short_socket_dir
from tests.serve_helpers import STARTS_WITHIN, running, serve_config, serve_env, stop, web_page, write_serve_home

OPEN_FILES = 160  # room for klaw serve's own files and sockets, not for the flood
FLOOD = 400
WITHOUT_UVLOOP = (
    "import runpy, sys; sys.modules['uvloop'] = None; sys.argv = ['klaw', 'serve'];"
    " runpy.run_module('klaw', run_name='__main__')"
)


def low_open_files_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))


async def test_out_of_open_files_is_one_line_and_the_page_comes_back() -> None:
    said: list[bytes] = []
    with short_socket_dir() as directory:
        home = directory / "home"
        async with FakeOpenAiServer() as model:
            write_serve_home(home, serve_config(model.base_url))
            env = serve_env(home)
            async with running("-c", WITHOUT_UVLOOP, env=env, preexec_fn=low_open_files_limit) as serve:
                stderr = serve.stderr
                assert stderr is not None
                full = asyncio.Event()  # the line about open files was logged

                async def read_log() -> None:  # always read: a full pipe would stall klaw's event loop
                    while line := await stderr.readline():
                        said.append(line)
                        if b"Too many open files" in line:
                            full.set()

                reading = asyncio.create_task(read_log())
                flood: list[asyncio.StreamWriter] = []
                try:
                    url = await web_page(serve)
                    host, port = url.removeprefix("http://").rstrip("/").split(":")
                    for _ in range(FLOOD):  # the kernel's backlog takes them; klaw cannot accept them all
                        with contextlib.suppress(OSError):
                            flood.append((await asyncio.open_connection(host, int(port)))[1])
                    async with asyncio.timeout(STARTS_WITHIN):
                        await full.wait()
                    for writer in flood:
                        writer.close()
                    async with httpx.AsyncClient(base_url=url) as browser, asyncio.timeout(STARTS_WITHIN):
                        while True:  # klaw accepts again a moment after the flood goes
                            with contextlib.suppress(httpx.HTTPError):
                                if (await browser.get("/login", timeout=10)).status_code == 200:
                                    break
                            await asyncio.sleep(0.05)
                finally:
                    for writer in flood:
                        writer.close()
                    with contextlib.suppress(TimeoutError):
                        await stop(serve)  # killed if it does not stop in time
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
