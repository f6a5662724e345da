"""A person watching `klaw gateway` is told when the engine goes away and when it is back, once each.

Real processes: `klaw engine` (killed with SIGKILL, then started again) and `klaw gateway` with its
web page, whose stderr is read as a person at its terminal would. A message sent through the page
while the engine is down waits in the buffer; the lines say so, never quote it, and the reconnect
attempts in between say nothing.
"""

from __future__ import annotations

import asyncio
import signal
import sys

import httpx

from klaw.channels.web.auth import CSRF_HEADER
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from tests.channels.test_web_app import session_csrf, sign_in
from tests.engine import short_socket_dir
from tests.gateway.test_engine_killed_mid_burst import write_config
from tests.serve_helpers import EngineProcess, Lines, serve_env, stop

SECRET = "quokka diary entry"


async def test_the_gateway_says_once_when_the_engine_is_lost_and_when_it_is_back() -> None:
    with short_socket_dir() as directory:
        home = KlawHome(directory / "home")
        initialise_home(home)
        async with FakeOpenAiServer() as model:
            write_config(home, model.base_url, web=True)
            # Attempts at most 0.5 s apart (channels.engineReconnectMaxSeconds): the restarted engine is reached
            # within 0.5 s of its start, not after a wait of up to 10 s (the default's last doubling).
            env = serve_env(home.root, COLUMNS="200", KLAW__CHANNELS__ENGINERECONNECTMAXSECONDS="0.5")
            gateway = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "klaw", "gateway", env=env,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            assert gateway.stdout is not None and gateway.stderr is not None
            said, out = Lines(gateway.stderr), Lines(gateway.stdout)
            engine = EngineProcess(home)
            try:
                # Started before the engine: it says the engine is not there, and what to do.
                absent = await said.until("the engine is not running")
                assert "klaw engine" in absent and "buffer" in absent
                url = (await out.until("web page:")).split()[-1]
                await engine.start()
                assert "0 buffered message(s)" in await said.until("reached the engine after")

                assert await engine.stop(signal.SIGKILL) == -signal.SIGKILL
                lost = await said.until("lost the engine")
                assert "buffer" in lost
                async with httpx.AsyncClient(base_url=url) as client:
                    assert (await sign_in(client, home.web_token_file.read_text().strip())).status_code == 303
                    csrf = await session_csrf(client)
                    sent = await client.post("/api/messages", json={"text": SECRET}, headers={CSRF_HEADER: csrf})
                    assert sent.status_code == 200 and sent.json()["queued"] is True
                await asyncio.sleep(1.5)  # reconnect attempts (0.2 s doubling to 0.5 s) go by, unsaid
                await engine.start()
                back = await said.until("the engine is back")
                assert "1 buffered message(s)" in back
                away = float(back.split("back after ")[1].split(" s")[0])
                assert away >= 1.5
            finally:
                await stop(gateway)
                if engine.process is not None and engine.process.returncode is None:
                    await engine.stop(signal.SIGTERM)
            said.seen.extend(line.decode() for line in (await gateway.stderr.read()).splitlines(keepends=True))
    spoken = "".join(said.seen)
    assert spoken.count("lost the engine") == 1 and spoken.count("the engine is back") == 1, spoken
    assert spoken.count("the engine is not running") == 1 and spoken.count("reached the engine") == 1, spoken
    assert "retrying" not in spoken and "Traceback" not in spoken
    assert SECRET not in spoken
