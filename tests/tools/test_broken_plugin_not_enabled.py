"""An installed plugin that cannot import, not enabled (newcomer24 item 21, decision 540): `klaw tools` listed it as
"installed, not enabled; fix: add broken to tools.enabled" (enabling it would have failed) and `klaw tools broken`
exited 0 with "Its tools cannot be shown: …". It is said broken now, with the import error's type and first line,
never a traceback, and naming it exits 1. The plugin is a real dist-info on the path, the home a real one."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.klaw_here import klaw_here
from tests.tools.conftest import install

BROKEN = 'raise ImportError("klaw_broken_dep needs libfoo 2\\nsecond line")\n'
FINE = '''
async def shout(text: str) -> str:
    """Shout it.

    Args:
        text: what to shout
    """
    return text.upper()


TOOLS = [shout]
'''


def test_a_plugin_that_cannot_import_is_said_broken_and_not_advised_to_be_enabled(tmp_path: Path, site: Path) -> None:
    install(site, "broken", "klaw_broken_dep", BROKEN, "TOOLS")
    install(site, "fine", "klaw_fine_dep", FINE, "TOOLS")
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    config = {"embedder": {"backend": "fake", "dim": 32}, "tools": {"enabled": ["clock"]}}
    (home / "engine.yaml").write_text(json.dumps(config), encoding="utf-8")

    listed = klaw_here(home, "tools", env={"COLUMNS": "400"})
    assert listed.returncode == 0, listed.stderr  # nothing enabled failed
    row = next(line for line in listed.stdout.splitlines() if line.lstrip().startswith("broken"))
    assert (
        "installed, not enabled, and broken: loading klaw_broken_dep:TOOLS raised ImportError: klaw_broken_dep" in row
    )
    assert "needs libfoo 2" in row and "second line" not in row and "add broken to tools.enabled" not in row, row
    fine = next(line for line in listed.stdout.splitlines() if line.lstrip().startswith("fine"))
    assert "installed, not enabled" in fine and "add fine to tools.enabled" in fine  # a sound one as before

    named = klaw_here(home, "tools", "broken", env={"COLUMNS": "400"})
    assert named.returncode == 1, named.stdout  # before: 0
    assert "raised ImportError: klaw_broken_dep needs libfoo 2" in named.stdout
    assert "add broken to tools.enabled" not in named.stdout and "Traceback" not in named.stdout + named.stderr
    as_json = klaw_here(home, "tools", "broken", "--json")
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["reason"].startswith("installed, not enabled, and broken: loading")
    assert klaw_here(home, "tools", "fine").returncode == 0
