"""A tool group that fails to load, as a person checks an installation: `klaw config check` refuses
(exit 1, naming the group, why, the fix and `klaw tools`) where it said "valid", and `klaw tools` says
each failure once, as its row, not also as an ERROR log line."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from tests.tools.conftest import install

BROKEN = "klaw_once_broken"
CONFIG = """embedder: {backend: fake, dim: 32}
models: {fake/m: {baseUrl: "http://127.0.0.1:9/v1"}}
routing: {default: fake/m}
tools: {enabled: [clock, broken]}
"""


async def klaw(home: Path, site: Path, *args: str) -> tuple[int, str, str]:
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))  # a worktree's src kept
    env = {**os.environ, "KLAW_HOME": str(home), "PYTHONPATH": path, "COLUMNS": "200"}
    process = await asyncio.create_subprocess_exec(sys.executable, "-m", "klaw", *args, env=env, stdout=-1, stderr=-1)
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    return process.returncode or 0, out.decode(), err.decode()


async def test_a_group_that_fails_to_load_is_refused_by_config_check_and_said_once_by_klaw_tools(
    tmp_path: Path, site: Path
) -> None:
    install(site, "broken", BROKEN, "raise ImportError('missing dependency')\n", "TOOLS")
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "engine.yaml").write_text(CONFIG, encoding="utf-8")
    (home / "engine.yaml").chmod(0o600)

    code, out, err = await klaw(home, site, "config", "check")
    said = " ".join(err.split())
    assert code == 1 and "valid" not in out.replace(f"{home}", ""), (out, err)
    assert "is valid, but tool group 'broken' fails to load: loading klaw_once_broken:TOOLS raised ImportError" in said
    assert "`klaw tools` lists what the agent is offered and what failed" in said, said
    assert "ERROR" not in err and "Traceback" not in err, err

    code, out, err = await klaw(home, site, "tools")
    assert code == 1, err
    assert (out + err).count("ImportError") == 1, (out, err)
    assert "ERROR" not in err, err
