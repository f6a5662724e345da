"""What a home holds that klaw cannot use is refused at start in words naming it and the fix (decision 443):
a damaged `engine.lock` (a directory, a symbolic link to nothing), which gave a bare "[Errno 21] Is a
directory: …", and two MCP servers `X` and `X_`, whose tools `t` and `_t` were both `X___t` to the model
(the later registration took the other's calls, silently)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from klaw import ConfigError, FunctionModel, Klaw

CONFIG = {"embedder": {"backend": "fake", "dim": 32}, "summarizer": {"enabled": False}}


async def test_a_damaged_engine_lock_is_named_with_its_fix(tmp_path: Path) -> None:
    home = tmp_path / "home"
    lock = home / "engine.lock"
    for said in ("is a directory", "symbolic link"):
        home.mkdir(exist_ok=True)
        if said == "is a directory":
            lock.mkdir()
        else:
            lock.symlink_to(tmp_path / "gone" / "x")
        with pytest.raises(OSError, match="not klaw's lock file") as refused:
            await Klaw(home, config=CONFIG, model=FunctionModel(lambda _m, _i: "ok")).start()
        words = str(refused.value)
        assert words.startswith(f"{lock} is ") and said in words and "[Errno" not in words, words
        assert f"remove it (rm -r {lock})" in words and "when no klaw runs" in words
        lock.rmdir() if lock.is_dir() and not lock.is_symlink() else lock.unlink()
    async with Klaw(home, config=CONFIG, model=FunctionModel(lambda _m, _i: "ok")) as agent:  # as told: it starts
        assert await agent.ask("me", "hi") == "ok"


async def test_two_mcp_servers_whose_tools_could_share_a_name_are_refused_naming_both(tmp_path: Path) -> None:
    server = {"command": sys.executable, "args": ["-c", "pass"]}
    config = {**CONFIG, "mcp": {"servers": {"notes": server, "notes_": server}}}
    with pytest.raises(ConfigError) as refused:
        await Klaw(tmp_path / "home", config=config, model=FunctionModel(lambda _m, _i: "ok")).start()
    words = " ".join(str(refused.value).split())
    assert "'notes' and 'notes_'" in words and "notes___search" in words and "rename 'notes_'" in words, words
