"""What newcomer22 met around `klaw serve` (decision 513): `klaw service install` beside a `klaw serve` run by
hand names it and says to stop it first (the unit it writes would otherwise restart every 5 s, exit 75, until the
manual one stops); `klaw serve` at a terminal says it starts at once, then each slow step."""

from __future__ import annotations

import asyncio
import os
import pty
from pathlib import Path

from klaw.store.shared.migrations import bundled_migrations
from tests.cli.klaw_here import klaw_here
from tests.cli.test_db_info_migrated import _at_version
from tests.cli.test_serve_model_check import _terminal_until
from tests.engine import short_socket_dir
from tests.serve_helpers import read_until, running, serve_config, serve_env, stop, write_serve_home


async def test_service_install_beside_a_running_serve_names_it_and_says_to_stop_it_first(tmp_path: Path) -> None:
    xdg = {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    with short_socket_dir() as directory:
        home = write_serve_home(directory / "home", serve_config("http://127.0.0.1:9/v1"))
        alone = await asyncio.to_thread(klaw_here, home, "service", "install", env=xdg)
        assert alone.returncode == 0 and "is running on this home now" not in alone.stdout, alone.stdout
        async with running("-m", "klaw", "serve", env=serve_env(home)) as serve:
            await read_until(serve.stdout, "web page:")
            beside = await asyncio.to_thread(klaw_here, home, "service", "install", env=xdg)
            said = " ".join(beside.stdout.split())
            assert beside.returncode == 0, beside.stderr
            assert f"`klaw serve` (pid {serve.pid}) is running on this home now: stop it first" in said, said
            assert f"kill {serve.pid}" in said and "exits 75" in said
            assert (tmp_path / "xdg" / "systemd" / "user" / "klaw.service").exists()  # still written
            assert await stop(serve) == 0


async def test_serve_at_a_terminal_says_it_starts_at_once_and_each_slow_step(tmp_path: Path) -> None:
    """`klaw serve` said nothing for ~10 s on a loaded machine, more on the first start after an upgrade: the
    starting line now comes before the command line loads, then a line as each slow step begins, on stderr at a
    terminal; stdout, which scripts read, is what it was."""
    terminal, its_side = pty.openpty()
    try:
        with short_socket_dir() as directory:
            home = write_serve_home(directory / "home", serve_config("http://127.0.0.1:9/v1"))
            await _at_version(home / "klaw.db", 4)  # a home an older klaw left
            latest = len(bundled_migrations("klaw.store.sqlite"))
            async with running("-m", "klaw", "serve", env=serve_env(home), stderr=its_side) as serve:
                os.close(its_side)
                its_side = -1
                out = await read_until(serve.stdout, "web page:")
                said = await _terminal_until(terminal, "goes on", "klaw serve")
                starting = f"klaw serve starting on {home}… (it says when it is ready)"
                assert said.startswith(starting), said  # the first thing said, and said once
                assert said.count("starting on") == 1
                moving = f"moving {home / 'klaw.db'} from schema version 4 to {latest}, once after an upgrade…"
                assert said.index(starting) < said.index("loading the engine…") < said.index(moving), said
                assert out.startswith("klaw engine and gateway running"), out  # stdout unchanged
                assert await stop(serve) == 0
    finally:
        os.close(terminal)
        if its_side >= 0:
            os.close(its_side)
