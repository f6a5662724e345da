"""Code in the bubblewrap sandbox cannot hold the host's memory outside its limits (decision 419).

`prlimit --as` does not see a memfd written with write(), SysV shared memory detached after filling,
semaphore arrays or keys; a normal user's klaw has no memory cgroup to count them. The seccomp filter
refuses those calls, for root too (these tests run as root here), and ordinary Python still works.
Each test runs real code through `code_execute` and reads what the model would.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from klaw.home import KlawHome
from klaw.tools.sandbox import seccomp_filter
from tests.cli.inited_home import init_home
from tests.cli.test_cli import klaw
from tests.tools.sandbox_helpers import Runner, home_with_secrets, no_sandbox_reason

pytestmark = pytest.mark.skipif(no_sandbox_reason() is not None, reason=f"no sandbox here: {no_sandbox_reason()}")
needs_filter = pytest.mark.skipif(
    seccomp_filter.seccomp_filter().program is None, reason=seccomp_filter.seccomp_filter().missing
)

# each memfd under sandbox.maxFileMb (RLIMIT_FSIZE bounds one file), five of them past memoryMb
HOLD_IN_MEMFD = """
import os
block = b'x' * (1 << 20)
held = []
try:
    for number in range(5):
        fd = os.memfd_create(f'hold{number}')
        for _ in range(50):
            os.write(fd, block)
        held.append(fd)
except OSError as exc:
    print('memfd_create refused:', exc)
print('held', 50 * len(held), 'MiB in memfds')
"""


def _number(name: str) -> int:
    """The call's number on this machine's architecture, from libseccomp (x86_64 and aarch64 differ)."""
    import pyseccomp

    return int(pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name))


def _calls_code() -> str:
    calls = {
        "shmget": "0, 1 << 20, 0o1600",  # IPC_PRIVATE, IPC_CREAT
        "semget": "0, 1, 0o1600",
        "msgget": "0, 0o1600",
        "keyctl": "0, -3, 1",  # KEYCTL_GET_KEYRING_ID of the session keyring, made if missing
        "add_key": "b'user', b'klaw', b'value', 5, -3",
        "userfaultfd": "1",  # UFFD_USER_MODE_ONLY: allowed to any user without the filter
        "io_uring_setup": "1, ctypes.create_string_buffer(120)",
        "bpf": "0, 0, 0",  # BPF_MAP_CREATE of nothing: EFAULT or EINVAL without the filter
        "perf_event_open": "0, 0, -1, -1, 0",
    }
    lines = ["import ctypes, errno, os", "libc = ctypes.CDLL(None, use_errno=True)"]
    for name, arguments in calls.items():
        lines.append(f"done = libc.syscall({_number(name)}, {arguments})")
        lines.append(f"print({name!r}, 'ok' if done >= 0 else errno.errorcode[ctypes.get_errno()])")
    for where in ("/tmp", "/dev/shm"):  # an attribute's value is kernel memory, outside tmpMb (adversary20)
        lines += [
            f"open('{where}/held', 'w').close()",
            "try:",
            f"    os.setxattr('{where}/held', 'user.big', b'v' * 65536); print('setxattr {where} ok')",
            "except OSError as exc:",
            f"    print('setxattr {where}', errno.errorcode[exc.errno])",
        ]
    return "\n".join(lines)


ORDINARY = """
import ctypes, multiprocessing, subprocess, tempfile, threading
from multiprocessing import shared_memory
with multiprocessing.Pool(2) as pool:
    print('pool', pool.map(abs, [-1, -2, -3]))
block = shared_memory.SharedMemory(create=True, size=1 << 20)
block.buf[0] = 7
print('shared_memory', block.buf[0])
block.close(); block.unlink()
lock = multiprocessing.Lock()
with lock:
    print('lock taken')
print(subprocess.run(['sh', '-c', 'echo from a subprocess'], capture_output=True, text=True).stdout.strip())
callback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(lambda x: x + 1)
print('ctypes callback', callback(41))
threads = [threading.Thread(target=lambda: None) for _ in range(8)]
[t.start() for t in threads]; [t.join() for t in threads]
with tempfile.TemporaryFile() as file:
    file.write(b'x' * (1 << 20))
    print('tmp file', file.tell())
import os, shutil
os.makedirs('/tmp/tree/sub'); open('/tmp/tree/sub/a.txt', 'w').write('kept')
shutil.copy2('/tmp/tree/sub/a.txt', '/tmp/b.txt'); print('copy2', open('/tmp/b.txt').read())
shutil.copytree('/tmp/tree', '/tmp/tree2'); print('copytree', os.listdir('/tmp/tree2/sub'))
print(subprocess.run(['cp', '-a', '/tmp/tree', '/tmp/tree3'], capture_output=True, text=True).returncode, 'cp -a')
os.makedirs('/tmp/out')
tar = 'tar -C /tmp -cf /tmp/t.tar tree && tar --xattrs -C /tmp/out -xf /tmp/t.tar'
print(subprocess.run(['sh', '-c', tar], capture_output=True, text=True).returncode, 'tar')
print('untarred', open('/tmp/out/tree/sub/a.txt').read())
"""


@needs_filter
async def test_a_memfd_written_past_memory_mb_is_refused(tmp_path: Path) -> None:
    runner = Runner(home_with_secrets(tmp_path), backend="bubblewrap", memoryMb=128)
    result = await runner.run(HOLD_IN_MEMFD, timeout_seconds=20)
    assert result.content.startswith("exit code 0"), result.content
    assert "memfd_create refused: [Errno 1] Operation not permitted" in result.content
    assert "held 0 MiB in memfds" in result.content


@needs_filter
async def test_sysv_ipc_keyrings_userfaultfd_io_uring_bpf_and_xattrs_are_refused(tmp_path: Path) -> None:
    result = await Runner(home_with_secrets(tmp_path), backend="bubblewrap").run(_calls_code())
    assert result.content.startswith("exit code 0"), result.content
    for name in ("shmget", "semget", "msgget", "keyctl", "add_key", "userfaultfd", "bpf", "perf_event_open"):
        assert f"{name} EPERM" in result.content, result.content
    assert "io_uring_setup ENOSYS" in result.content  # as on a kernel without io_uring: callers fall back
    # as on a file system without extended attributes: copy2, cp -a and tar go on (ORDINARY below)
    assert "setxattr /tmp ENOTSUP" in result.content and "setxattr /dev/shm ENOTSUP" in result.content


@needs_filter
async def test_ordinary_python_still_runs_under_the_filter(tmp_path: Path) -> None:
    result = await Runner(home_with_secrets(tmp_path), backend="bubblewrap").run(ORDINARY)
    assert result.content.startswith("exit code 0"), result.content
    for said in (
        "pool [1, 2, 3]",
        "shared_memory 7",
        "lock taken",
        "from a subprocess",
        "ctypes callback 42",
        "tmp file 1048576",
        "copy2 kept",
        "copytree ['a.txt']",
        "0 cp -a",
        "0 tar",
        "untarred kept",
    ):
        assert said in result.content, result.content


@needs_filter
async def test_numpy_in_the_sandbox_virtualenv_still_runs_under_the_filter(tmp_path: Path) -> None:
    """numpy (with its OpenBLAS threads) from the sandbox virtualenv: copied from klaw's own, both CPython 3.11
    here, as `klaw sandbox install numpy` would put it (no download in a test)."""
    home = home_with_secrets(tmp_path)
    _sandbox_venv_with_numpy(home)
    code = "import numpy as np\na = np.random.default_rng(1).random((300, 300))\nprint('matmul', (a @ a.T).shape)\n"
    result = await Runner(home, backend="bubblewrap").run(code, timeout_seconds=30)
    assert "matmul (300, 300)" in result.content, result.content


def _sandbox_venv_with_numpy(home: KlawHome) -> None:
    numpy = pytest.importorskip("numpy")
    version = subprocess.run(
        ["/usr/bin/python3", "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True
    )
    if version.stdout.strip() != str(sys.version_info[:2]):
        pytest.skip("the sandbox's /usr/bin/python3 is not klaw's Python version: numpy's wheel would not load")
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(home.sandbox_venv)], check=True)
    site = next(home.sandbox_venv.glob("lib/python3*/site-packages"))
    packages = Path(numpy.__file__).parent.parent
    for name in ("numpy", "numpy.libs"):
        if (packages / name).is_dir():
            shutil.copytree(packages / name, site / name, symlinks=True)


async def test_without_libseccomp_the_sandbox_runs_and_status_says_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "fake"  # what pyseccomp does where Debian's libseccomp2 is not installed
    fake.mkdir()
    (fake / "pyseccomp.py").write_text("raise RuntimeError('Unable to find libseccomp')\n", encoding="utf-8")
    home = tmp_path / "home"
    init_home(home)
    path = os.pathsep.join([str(fake), *sys.path])
    shown = klaw(home, "sandbox", "status", env={"PYTHONPATH": path})
    assert shown.returncode == 0, shown.stderr
    assert "backend: bubblewrap" in shown.stdout
    assert "NO seccomp filter (libseccomp is not installed: apt install libseccomp2)" in shown.stdout
    assert "memfd_create files" in shown.stdout
    if seccomp_filter.seccomp_filter().program is None:
        pytest.skip(seccomp_filter.seccomp_filter().missing)
    working = klaw(home, "sandbox", "status")
    assert "seccomp filter refuses memfd_create" in working.stdout, working.stdout

    # the package not installed: import fails
    await _runs_with(monkeypatch, None, home, "import os; os.memfd_create('x'); print('ran')")


async def _runs_with(monkeypatch: pytest.MonkeyPatch, module: types.ModuleType | None, home: Path, code: str) -> None:
    """`code` runs in the bubblewrap sandbox (prints `ran`) with `module` as the engine's pyseccomp."""
    monkeypatch.setitem(sys.modules, "pyseccomp", module)
    seccomp_filter.seccomp_filter.cache_clear()
    try:
        result = await Runner(KlawHome(home), backend="bubblewrap").run(code)
    finally:
        monkeypatch.undo()
        seccomp_filter.seccomp_filter.cache_clear()
    assert result.content.startswith("exit code 0") and "ran" in result.content, result.content


# A pyseccomp whose program the kernel refuses (an unknown BPF instruction): what a kernel without
# CONFIG_SECCOMP_FILTER, or one refusing this filter, answers bwrap's prctl with.
REFUSED_PROGRAM = """
ALLOW = 0
def ERRNO(number):
    return number
class SyscallFilter:
    def __init__(self, default):
        pass
    def add_rule(self, action, name):
        pass
    def export_bpf(self, file):
        file.write(bytes([0xFF, 0xFF, 0, 0, 0, 0, 0, 0]))
"""


async def test_a_filter_the_kernel_refuses_leaves_the_sandbox_running_and_status_names_bwraps_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "pyseccomp.py").write_text(REFUSED_PROGRAM, encoding="utf-8")
    home = tmp_path / "home"
    init_home(home)
    env = {"PYTHONPATH": os.pathsep.join([str(fake), *sys.path])}
    shown = klaw(home, "sandbox", "status", env=env)
    assert shown.returncode == 0, shown.stderr
    assert "backend: bubblewrap" in shown.stdout, shown.stdout
    line = next(line for line in shown.stdout.splitlines() if line.startswith("memory outside the processes"))
    assert "NO seccomp filter (bwrap could not load it here: " in line, line
    assert "PR_SET_SECCOMP" in line, line
    assert "user namespaces" not in line, line  # they work: only the filter was refused

    refusing = types.ModuleType("pyseccomp")
    exec(REFUSED_PROGRAM, refusing.__dict__)
    await _runs_with(monkeypatch, refusing, home, "print('ran')")


THREADS = """
import threading
started, go = [], threading.Event()
def wait():
    go.wait()
try:
    for number in range(60):
        thread = threading.Thread(target=wait)
        thread.start()
        started.append(thread)
finally:
    go.set()
    [thread.join() for thread in started]
print('threads started', len(started))
"""


async def test_sixty_threads_start_under_the_default_limits(tmp_path: Path) -> None:
    """Each thread's malloc arena (64 MiB of address space) counted against memoryMb: the 15th thread could not
    start under the default 1024 (adversary20); docs/sandbox.md promises 64 processes and threads."""
    result = await Runner(home_with_secrets(tmp_path), backend="bubblewrap").run(THREADS)
    assert result.content.startswith("exit code 0") and "threads started 60" in result.content, result.content
