"""`sandbox.maxProcesses` above the account's hard limit of processes (`ulimit -Hu`): prlimit inside the sandbox
cannot set it, and `/status` said "bwrap does not work here …; user namespaces may be disabled", sending the
person after the kernel (adversary21). It names the setting and the limit now. Through the library API, with
the real bubblewrap."""

from __future__ import annotations

import resource
from pathlib import Path

import pytest

from klaw import FunctionModel, Klaw
from tests.tools.sandbox_helpers import no_sandbox_reason

HARD = resource.getrlimit(resource.RLIMIT_NPROC)[1]


@pytest.mark.skipif(no_sandbox_reason() is not None, reason=no_sandbox_reason() or "")
@pytest.mark.skipif(HARD == resource.RLIM_INFINITY, reason="this account has no hard limit of processes")
async def test_a_process_cap_above_the_hard_limit_names_the_setting(tmp_path: Path) -> None:
    config = {
        "embedder": {"backend": "fake", "dim": 32},
        "summarizer": {"enabled": False},
        "tools": {"enabled": ["code"]},
        "sandbox": {"maxProcesses": HARD + 1},
    }
    async with Klaw(tmp_path / "home", config=config, model=FunctionModel(lambda messages, info: "hi")) as agent:
        status = await agent.ask("alice", "/status")
    said = " ".join(status.split())
    assert "sandbox.maxProcesses in engine.yaml is above this account's hard limit of processes" in said, said
    assert "user namespaces may be disabled" not in said, said
