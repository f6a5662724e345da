"""The attack of decision 243, for the race tests: a process that exchanges two paths (a real folder or
file and a symlink leading out) with renameat2 RENAME_EXCHANGE as fast as it can, as code run by
`code_execute` can, while a test calls the tools again and again."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

FLIPPER = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b = os.fsencode(sys.argv[1]), os.fsencode(sys.argv[2])
print("ready", flush=True)
while True:
    if libc.renameat2(-100, a, -100, b, 2) != 0:  # RENAME_EXCHANGE
        sys.exit(f"renameat2: errno {ctypes.get_errno()}")
"""

Flip = Callable[[Path, Path], None]


@contextmanager
def flippers() -> Iterator[Flip]:
    """`start(real, link)` starts a flipper exchanging the two, once it runs; each is checked to be still
    flipping at the end (it stops on an error of renameat2), then stopped by its own handle."""
    started: list[subprocess.Popen[str]] = []

    def start(real: Path, link: Path) -> None:
        process = subprocess.Popen(
            [sys.executable, "-c", FLIPPER, str(real), str(link)], stdout=subprocess.PIPE, text=True
        )
        started.append(process)
        assert process.stdout is not None and process.stdout.readline() == "ready\n"

    try:
        yield start
        for process in started:
            assert process.poll() is None, "the flipper stopped early"
    finally:
        for process in started:
            process.kill()
            process.wait()
