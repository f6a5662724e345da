"""`klaw bench sandbox`: what a trivial `code_execute` costs, start to result, on this machine.

A call makes fresh namespaces, mounts, a process under `prlimit`, and the workspace snapshots around
it; the figure is the whole tool call as the engine makes it (through the registry), for a shell
`true` and for Python printing a line, each `runs` times after one warm-up call. As in the engine, the
prompt files and a skill are there, copied read-only into each run (decision 283), and the workspace's
room measured before and after each run (decision 327).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from klaw.bench.stats import Latency
from klaw.config import SandboxConfig, ToolsConfig
from klaw.home import SKILLS_FOLDER, KlawHome
from klaw.home_init import PROTECTED_WORKSPACE, WORKSPACE_FILES
from klaw.llm.messages import ToolCall
from klaw.private_files import write_private
from klaw.store.records import ChatRef
from klaw.tools.disk_room import DiskRoom
from klaw.tools.registry import ToolRegistry
from klaw.tools.sandbox.backend import Unavailable
from klaw.tools.sandbox.choice import choose_backend
from klaw.tools.sandbox.tool import register_code_execute
from klaw.tools.schema import ToolContext


@dataclass(frozen=True)
class SandboxFigures:
    backend: str
    shell_true: Latency
    python_print: Latency


async def measure_sandbox(root: Path, config: SandboxConfig, runs: int) -> SandboxFigures | Unavailable:
    home = KlawHome(root)
    home.workspace.mkdir(parents=True, exist_ok=True)
    for name in WORKSPACE_FILES:
        write_private(home.workspace / name, f"# {name}\n\nA few lines, as a person's own.\n".encode())
    write_private(home.workspace / SKILLS_FOLDER / "example" / "SKILL.md", b"---\nname: example\n---\nbody\n")
    backend = choose_backend(config, home)
    if isinstance(backend, Unavailable):
        return backend
    registry = ToolRegistry()
    room = DiskRoom.from_config(ToolsConfig())  # the engine's default quota and floor (decision 327)
    register_code_execute(registry, backend, config, read_only=PROTECTED_WORKSPACE, room=room)
    context = ToolContext(ChatRef("bench", "sandbox"), home.workspace)

    async def timed(language: str, code: str) -> Latency:
        call = ToolCall("bench", "code_execute", json.dumps({"language": language, "code": code}))
        await registry.execute(call, context)  # warm-up: page cache, the probe's leftovers
        seconds = []
        for _ in range(runs):
            started = time.perf_counter()
            result = await registry.execute(call, context)
            seconds.append(time.perf_counter() - started)
            if not result.content.startswith("exit code 0"):
                raise RuntimeError(f"the benchmark's trivial call failed: {result.content[:200]}")
        return Latency.of(seconds)

    return SandboxFigures(backend.name, await timed("shell", "true"), await timed("python", "print('hi')"))
