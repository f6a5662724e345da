"""Sandbox runs are bounded together: a reply with many code_execute calls does not start them all at
once, one chat's many calls do not hold up another chat, and (where a memory cgroup can be made) a run's
processes together stay within sandbox.memoryMb (docs/decisions/224-sandbox-runs-bounded-together.md).

Each run records when it started and ended in the workspace; the tests assert on how those intervals
overlap, never on how long anything took.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from klaw.llm.messages import ToolCall
from klaw.store.records import ChatRef
from klaw.tools.calls import ToolResult
from klaw.tools.schema import ToolContext
from tests.tools.sandbox_helpers import Runner, home_with_secrets

RECORD = """
import os, time
name = {name!r}
start = time.time()
time.sleep(0.4)
with open('/workspace/times-' + name + '.txt', 'w') as f:
    f.write(f'{{start}} {{time.time()}}')
print('done', name)
"""


async def run_in(runner: Runner, chat: ChatRef, name: str) -> ToolResult:
    arguments: dict[str, Any] = {"language": "python", "code": RECORD.format(name=name)}
    context = ToolContext(chat, runner.home.workspace)
    return await runner.registry.execute(ToolCall(f"call_{name}", "code_execute", json.dumps(arguments)), context)


def intervals(workspace: Path, prefix: str) -> list[tuple[float, float]]:
    found = []
    for path in sorted(workspace.glob(f"times-{prefix}*.txt")):
        start, end = path.read_text(encoding="utf-8").split()
        found.append((float(start), float(end)))
    return found


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The largest number of intervals holding one moment."""
    return max(sum(1 for start, end in spans if start <= moment < end) for moment, _ in spans)


async def test_a_round_of_six_calls_never_runs_more_than_the_cap_at_once(tmp_path: Path) -> None:
    home = home_with_secrets(tmp_path)
    runner = Runner(home, backend="bubblewrap", maxConcurrentRuns=2, maxConcurrentRunsPerChat=2)
    chat = ChatRef("console", "me")
    results = await asyncio.gather(*(run_in(runner, chat, f"a{i}") for i in range(6)))
    for result in results:
        assert not result.is_error, result.content
        assert result.content.startswith("exit code 0 after"), result.content
        assert "wait" not in result.content and "slot" not in result.content  # nothing odd for the model
    spans = intervals(home.workspace, "a")
    assert len(spans) == 6
    assert most_at_once(spans) <= 2


async def test_one_chats_many_calls_do_not_hold_up_another_chats_call(tmp_path: Path) -> None:
    home = home_with_secrets(tmp_path)
    runner = Runner(home, backend="bubblewrap")  # the defaults: 2 at once, 1 per chat
    busy, other = ChatRef("console", "busy"), ChatRef("console", "other")
    calls = [run_in(runner, busy, f"b{i}") for i in range(6)] + [run_in(runner, other, "c0")]
    results = await asyncio.gather(*calls)
    assert all(not result.is_error for result in results)
    busy_spans = intervals(home.workspace, "b")
    (other_span,) = intervals(home.workspace, "c")
    assert most_at_once(busy_spans) == 1
    assert most_at_once([*busy_spans, other_span]) <= 2
    later_busy_starts = sorted(start for start, _ in busy_spans)[2:]
    assert other_span[0] < min(later_busy_starts)  # it waited behind at most two of the busy chat's runs


FORK_THREE = """
import os, sys, time
each = int({memory_mb} * 1024 * 1024 * 0.6)
children = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        held = b'x' * each  # written, so really held
        time.sleep(2)
        os._exit(0)
    children.append(pid)
whole = sum(1 for pid in children if os.waitpid(pid, 0)[1] == 0)
print('children that held their memory to the end:', whole)
sys.exit(0 if whole == 3 else 1)
"""


async def test_a_runs_processes_together_cannot_pass_memory_mb_where_a_memory_cgroup_can_be_made(
    tmp_path: Path,
) -> None:
    if os.geteuid() != 0:
        pytest.skip("the memory cgroup is made only when klaw runs as root; a normal user's cap is per process")
    if not memory_controller_here():
        pytest.skip("no memory cgroup can be made here (no memory controller for this process's cgroup)")
    runner = Runner(home_with_secrets(tmp_path), backend="bubblewrap", memoryMb=256)
    result = await runner.run(FORK_THREE.format(memory_mb=256), timeout_seconds=20)
    assert not result.is_error, result.content
    assert "the run's processes together passed sandbox.memoryMb (256 MiB)" in result.content, result.content
    assert "children that held their memory to the end: 3" not in result.content


def memory_controller_here() -> bool:
    """Whether this process's cgroup offers the memory controller to children (v2) or sits in a v1
    memory hierarchy: read from the kernel, not from klaw, so the test says what the machine allows."""
    root = Path("/sys/fs/cgroup")
    for line in Path("/proc/self/cgroup").read_text(encoding="utf-8").splitlines():
        number, controllers, path = line.split(":", 2)
        if number == "0" and (root / "cgroup.controllers").exists():
            delegated = (root / path.lstrip("/") / "cgroup.subtree_control").read_text(encoding="ascii").split()
            if "memory" in delegated:
                return True
        elif "memory" in controllers.split(",") and (root / "memory" / path.lstrip("/")).is_dir():
            return True
    return False


def test_one_registry_used_from_two_event_loops_still_runs_every_call(tmp_path: Path) -> None:
    """A library caller's second `asyncio.run` with the same engine: the slots of the first loop, where
    calls had to wait, do not refuse or break the second's."""
    home = home_with_secrets(tmp_path)
    runner = Runner(home, backend="bubblewrap")  # 2 at once: the third chat's call waits

    async def round_of(prefix: str) -> list[ToolResult]:
        return await asyncio.gather(*(run_in(runner, ChatRef("console", f"c{i}"), f"{prefix}{i}") for i in range(3)))

    for prefix in ("d", "e"):
        results = asyncio.run(round_of(prefix))
        assert all(result.content.startswith("exit code 0 after") for result in results), results
    assert len(intervals(home.workspace, "e")) == 3


_SHM_AND_DEV = """
import errno, multiprocessing, os
try:
    with open('/dev/shm/fill', 'wb') as f:
        for _ in range(64):
            f.write(bytes(1 << 20))
    print('shm: 64 MiB written')
except OSError as e:
    print('shm:', errno.errorcode[e.errno])
os.remove('/dev/shm/fill')
try:
    open('/dev/fill', 'wb').write(bytes(1 << 20))
    print('dev: written')
except OSError as e:
    print('dev:', errno.errorcode[e.errno])
open('/dev/null', 'w').write('still a device')
lock = multiprocessing.Lock()  # a POSIX semaphore in /dev/shm, as multiprocessing makes
with lock:
    print('semaphore works')
"""


async def test_dev_and_dev_shm_hold_no_more_than_tmp_mb(tmp_path: Path) -> None:
    """adversary17: bwrap's /dev is a tmpfs of half the host's RAM, writable and outside every limit: code
    held 1 GiB of the host's memory in /dev/shm (12 GiB possible here). /dev/shm is now a tmpfs of
    `sandbox.tmpMb` and /dev is read-only; devices and multiprocessing's semaphores still work."""
    runner = Runner(home_with_secrets(tmp_path), backend="bubblewrap", tmpMb=16)
    result = await runner.run(_SHM_AND_DEV, timeout_seconds=20)
    assert not result.is_error, result.content
    assert "shm: ENOSPC" in result.content, result.content
    assert "dev: EROFS" in result.content, result.content
    assert "semaphore works" in result.content, result.content


async def test_a_home_under_usr_is_hidden_by_nothing_the_code_can_fill(tmp_path: Path) -> None:
    """adversary18: a KLAW_HOME under /usr (which the sandbox shows read-only) is hidden by an empty tmpfs,
    unsized (half the host's RAM) and writable by the code. It is read-only now."""
    if not os.access("/usr/local", os.W_OK):
        pytest.skip("making a home under /usr/local needs root here")
    root = Path(tempfile.mkdtemp(prefix="klaw-test-", dir="/usr/local"))
    try:
        home = home_with_secrets(root)
        code = f"open({str(home.root.resolve() / 'fill')!r}, 'wb').write(bytes(1 << 20)); print('written')"
        result = await Runner(home, backend="bubblewrap").run(code, timeout_seconds=20)
        assert "Read-only file system" in result.content, result.content
        assert "secret" not in result.content
    finally:
        shutil.rmtree(root)
