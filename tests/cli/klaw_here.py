"""`klaw ARGS` run by klaw's own entry point in the test's process, for the tests whose point is a command's
words, exit status and files, not the process: each `klaw` process costs ~1-1.5 s of CPU (mostly imports)
on CI's two CPUs, which the suite's hundreds of them saturate (decision 462).

`klaw_here` takes the arguments of `tests.cli.test_cli.klaw` and answers as it does (a CompletedProcess with
the exit status, stdout and stderr). It calls `klaw.cli.main`, what `python -m klaw` runs, so klaw's handler of
a read-only home or a full disk is in it; an exception other than SystemExit is a traceback the person would
have seen and fails the test. What `main` changes for the process (umask, the cyclic collector, argv, the
environment, the working directory) is given back after it.

From an async test (an event loop running in this thread, where klaw's own `asyncio.run` cannot start), the
command runs in a thread of its own and the test waits for it, blocked as it was on `subprocess.run`: nothing of
the test's loop runs meanwhile, so no engine of the test sees the command's environment.

Keep a real process (`klaw`) where the process is what is tested: a start that would run on instead of ending
(`serve`, `engine`, `gateway`, `chat`, `mcp serve`), signals, kill -9, locks held by another process, what a
fresh interpreter imports, stdio.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from typer.testing import CliRunner

from klaw.cli import main


def klaw_here(
    home: Path, *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`klaw ARGS` on `home` in this process; `env` is added to this process's environment for the command
    only, `stdin` is what it reads (nothing when None)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _here(home, *args, env=env, stdin=stdin)
    with ThreadPoolExecutor(1, thread_name_prefix="klaw_here") as thread:  # an async test's: see the docstring
        return thread.submit(_here, home, *args, env=env, stdin=stdin).result()


def _here(
    home: Path, *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    umask, collecting, argv, cwd = os.umask(0o077), gc.isenabled(), sys.argv, os.getcwd()
    environment = dict(os.environ)
    root = logging.getLogger()
    level = root.level
    settings = {"KLAW_HOME": str(home), "COLUMNS": "200", **(env or {})}
    with CliRunner().isolation(input=stdin, env=settings) as (out, err, _):
        said = logging.StreamHandler(sys.stderr)  # the captured stderr: the log's lines as klaw's handler writes
        said.setLevel(logging.WARNING)
        root.addHandler(said)
        sys.argv = ["klaw", *args]
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        finally:
            sys.argv = argv
            root.removeHandler(said)
            root.setLevel(level)
            os.umask(umask)
            os.chdir(cwd)
            os.environ.clear()
            os.environ.update(environment)
            if collecting:
                gc.enable()
        return subprocess.CompletedProcess(["klaw", *args], code, out.getvalue().decode(), err.getvalue().decode())
