"""The docs tools work from an installed klaw, not only from this checkout: the wheel is built from the
repository, installed (without dependencies: the test's own environment has them) into a temporary
folder, and a turn of that klaw, through its library API, calls docs_search and docs_list. The docs come
from the installed package (klaw/docs), and the design decisions are not in the wheel."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

SCRIPT = """
import asyncio, json, sys
import klaw
from klaw import FunctionModel, Klaw, ManualClock
from klaw.llm.function_model import call_tool, tool_calls
from klaw.tools.docs.bundle import DocsBundle

def model(messages, info):
    if info.round == 1:
        return tool_calls(call_tool("docs_search", {"query": "how do I forget something"}, id="a"),
                          call_tool("docs_list", id="b"))
    return json.dumps([m.content for m in messages if m.role == "tool"])

async def main(home):
    config = {"embedder": {"backend": "fake", "dim": 32}, "summarizer": {"enabled": False}}
    async with Klaw(home, config=config, model=FunctionModel(model), clock=ManualClock()) as agent:
        found, listing = json.loads(await agent.ask("me", "how do I make you forget something?"))
    print(json.dumps({"klaw": klaw.__file__, "docs": str(DocsBundle.shipped().root),
                      "found": json.loads(found), "listing": json.loads(listing)}))

asyncio.run(main(sys.argv[1]))
"""


def test_docs_search_works_from_the_installed_wheel(tmp_path: Path) -> None:
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "wheel", str(REPO), "--no-deps", "-w", str(wheels)], check=True, timeout=300)
    [wheel] = wheels.glob("klaw-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "klaw/docs/memory/forgetting.md" in names and "klaw/docs/index.md" in names
    assert not any(name.startswith("klaw/docs/decisions/") for name in names)
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)], check=True, timeout=300)

    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "home")],
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        cwd=tmp_path,  # not the checkout: nothing may come from it
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["klaw"].startswith(str(site)) and result["docs"].startswith(str(site))
    # the page on forgetting is among the first hits (with the test's stand-in embedder full text ranks
    # them, and the slash commands page names forgetting too)
    assert "memory/forgetting.md" in [hit["path"] for hit in result["found"][:3]]
    paths = [entry["path"] for entry in result["listing"]]
    assert "memory/forgetting.md" in paths and not any(p.startswith("decisions/") for p in paths)
