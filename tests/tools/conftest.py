"""What the tool tests share: a package installed on the path as pip installs one (a real dist-info
with entry_points.txt), so a plugin arrives through the `klaw.tools` entry point group; a workspace
folder and the context a tool is called in for alice on the console."""

from __future__ import annotations

from pathlib import Path

import pytest

from klaw.store.records import ChatRef
from klaw.tools.schema import ToolContext


def install(site: Path, name: str, module: str, source: str, target: str) -> None:
    """`module` (its `source`) installed in `site`, offering the group `name` as `module:target`."""
    (site / f"{module}.py").write_text(source, encoding="utf-8")
    info = site / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[klaw.tools]\n{name} = {module}:{target}\n", encoding="utf-8")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder on sys.path to install plugins into (a subprocess gets it as PYTHONPATH)."""
    path = tmp_path / "site"
    path.mkdir()
    monkeypatch.syspath_prepend(str(path))
    return path


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty workspace folder."""
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
def context(workspace: Path) -> ToolContext:
    """The context of a tool called in alice's console chat, on `workspace`."""
    return ToolContext(chat=ChatRef("console", "alice"), workspace=workspace)
