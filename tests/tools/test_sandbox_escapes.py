"""Code the model writes runs in a real sandbox, and every way out fails and is reported, not crashed on.

Each test runs real code through `code_execute` as the registry runs it for the engine, and reads the
text the model would get. Every backend is tried: bubblewrap (installed by scripts/test.sh) and
Docker, skipped with the reason when no daemon answers. Limits are small so each test is fast.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest

from tests.tools.sandbox_helpers import Runner, home_with_secrets

BACKENDS = ["bubblewrap", "docker"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_code_runs_in_the_workspace_and_its_new_and_changed_files_are_listed(
    tmp_path: Path, backend: str
) -> None:
    home = home_with_secrets(tmp_path)
    (home.workspace / "old.txt").write_text("before", encoding="utf-8")
    result = await Runner(home, backend=backend).run(
        "import os\nprint(os.getcwd())\nopen('new.txt','w').write('made')\nopen('old.txt','a').write(' after')\n"
    )
    assert not result.is_error
    assert result.content.startswith("exit code 0 after")
    assert "stdout:\n/workspace" in result.content
    assert "files created: new.txt" in result.content and "files changed: old.txt" in result.content
    assert (home.workspace / "new.txt").read_text(encoding="utf-8") == "made"
    assert (home.workspace / "old.txt").read_text(encoding="utf-8") == "before after"


async def test_failing_code_is_a_result_the_model_reads_with_its_traceback(tmp_path: Path, backend: str) -> None:
    result = await Runner(home_with_secrets(tmp_path), backend=backend).run("1/0")
    assert not result.is_error
    assert result.content.startswith("exit code 1")
    assert "ZeroDivisionError" in result.content


async def test_writing_outside_the_workspace_fails(tmp_path: Path, backend: str) -> None:
    home = home_with_secrets(tmp_path)
    marker = f"klaw-escape-{uuid.uuid4().hex}"
    targets = [str(home.root / marker), f"/usr/{marker}", f"/etc/{marker}", f"/{marker}", f"/workspace/../{marker}"]
    code = "\n".join(
        [
            "for path in " + repr(targets) + ":",
            "    try:",
            "        open(path, 'w').write('x')",
            "        print('WROTE', path)",
            "    except OSError as exc:",
            "        print('refused', type(exc).__name__)",
            f"open('/tmp/{marker}', 'w').write('private tmp')",
        ]
    )
    result = await Runner(home, backend=backend).run(code)
    assert "WROTE" not in result.content
    assert result.content.count("refused") == len(targets)
    for path in [*targets, f"/tmp/{marker}"]:  # /tmp inside is the sandbox's own
        assert not os.path.exists(path)
    assert not (home.root / marker).exists()


async def test_klaw_home_cannot_be_read_from_the_sandbox(tmp_path: Path, backend: str) -> None:
    home = home_with_secrets(tmp_path)
    code = "\n".join(
        [
            "import os",
            f"for path in [{str(home.web_token_file)!r}, {str(home.config_file)!r}, '/workspace/../engine.yaml']:",
            "    try:",
            "        print(open(path).read())",
            "    except OSError as exc:",
            "        print('refused', type(exc).__name__)",
            "print(sorted(os.listdir('/')))",
        ]
    )
    result = await Runner(home, backend=backend).run(code)
    assert "secret" not in result.content
    assert result.content.count("refused FileNotFoundError") == 3
    assert "home" not in result.content.split("stdout:")[1].split("]")[0]


async def test_no_tcp_connection_reaches_a_loopback_server_unless_the_network_is_allowed(tmp_path: Path) -> None:
    connections: list[str] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append("connected")
        writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    code = "\n".join(
        [
            "import socket",
            "try:",
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=3).close()",
            "    print('CONNECTED')",
            "except OSError as exc:",
            "    print('refused', type(exc).__name__)",
        ]
    )
    async with server:
        closed = await Runner(home_with_secrets(tmp_path / "closed"), backend="bubblewrap").run(code)
        assert "refused" in closed.content and "CONNECTED" not in closed.content
        assert connections == []
        # The same code with sandbox.network: the test would have seen a connection made.
        open_ = await Runner(home_with_secrets(tmp_path / "open"), backend="bubblewrap", network=True).run(code)
        assert "CONNECTED" in open_.content
        assert connections == ["connected"]


async def test_a_fork_bomb_is_contained_and_nothing_of_it_outlives_the_call(tmp_path: Path, backend: str) -> None:
    token = f"klawbomb{uuid.uuid4().hex}"
    runner = Runner(home_with_secrets(tmp_path), backend=backend, maxProcesses=16)
    result = await runner.run(f"{token}=1; f() {{ f | f & }}; f; sleep 1; echo survived", "shell", timeout_seconds=5)
    assert not result.is_error
    assert "Cannot fork" in result.content  # the limit refused forks; the call still ended
    await asyncio.sleep(0.2)
    assert _processes_holding(token) == []


async def test_a_hundred_megabytes_of_output_are_cut_to_head_and_tail(tmp_path: Path, backend: str) -> None:
    code = "import sys\nprint('FIRST')\nfor _ in range(100):\n    sys.stdout.write('x' * 1048575 + '\\n')\n"
    result = await Runner(home_with_secrets(tmp_path), backend=backend, maxOutputMb=4).run(code)
    assert result.content.startswith("stopped: the output passed 4 MiB and the program was killed")
    assert "stdout:\nFIRST" in result.content
    assert "bytes cut" in result.content
    assert len(result.content) < 16_000


async def test_long_output_that_ends_keeps_its_end(tmp_path: Path, backend: str) -> None:
    code = "for i in range(20000):\n    print('line', i)\nprint('LAST')"
    result = await Runner(home_with_secrets(tmp_path), backend=backend).run(code)
    assert result.content.startswith("exit code 0")
    assert "line 0\n" in result.content and result.content.rstrip().endswith("LAST")
    assert "bytes cut" in result.content


async def test_an_endless_loop_is_stopped_at_the_wall_time(tmp_path: Path, backend: str) -> None:
    seconds = 5 if backend == "docker" else 1  # a container's start (~1 s here) counts against the wall time
    result = await Runner(home_with_secrets(tmp_path), backend=backend).run(
        "print('started', flush=True)\nwhile True: pass", timeout_seconds=seconds
    )
    assert result.content.startswith(f"stopped: the wall time of {seconds} s ran out and the program was killed")
    assert "started" in result.content


async def test_a_memory_hog_gets_a_memory_error(tmp_path: Path, backend: str) -> None:
    code = "chunks = []\nwhile True:\n    chunks.append(bytearray(64 * 1024 * 1024))"
    result = await Runner(home_with_secrets(tmp_path), backend=backend, memoryMb=256).run(code)
    assert not result.content.startswith("exit code 0")
    assert "MemoryError" in result.content or "killed by signal SIGKILL" in result.content


def _processes_holding(token: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    if token.encode() in cmdline.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found
