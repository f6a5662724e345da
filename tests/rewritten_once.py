"""Each test module's assertions rewritten once per run, before pytest-xdist's workers start, not once per worker.

pytest rewrites a test module's `assert` statements when it imports it and keeps the result in a .pyc under
`__pycache__`, but writes none when PYTHONDONTWRITEBYTECODE is set (as it is in this project's shells and CI).
Every xdist worker then parsed and rewrote all ~480 test modules itself: ~16 s of CPU apiece, ~50 s for CI's
three workers on two CPUs, all at the suite's start. Written here beforehand, in a process per CPU, each worker
finds them and only reads them (pytest reads such a .pyc whatever that variable says). Decision 356.

The functions used are pytest's own (`_pytest.assertion.rewrite`), so the files are exactly what pytest writes
and checks (by the source's hash); if a pytest release renames them, this does nothing and the workers rewrite
as before: slower, never wrong.
"""

from __future__ import annotations

import fnmatch
import multiprocessing
import os
import types
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

_config: pytest.Config | None = None  # the run's config, inherited by the forked processes


def test_modules(config: pytest.Config) -> list[Path]:
    """The files under the run's arguments that pytest's rewriting hook rewrites: its `python_files` and conftest."""
    patterns = [*config.getini("python_files"), "conftest.py"]
    found: set[Path] = set()
    for arg in config.args:
        path = Path(config.invocation_params.dir, arg.split("::")[0])
        candidates = path.rglob("*.py") if path.is_dir() else [path]
        found.update(p for p in candidates if any(fnmatch.fnmatch(p.name, pattern) for pattern in patterns))
    return sorted(found)


def _rewrite(paths: list[Path]) -> None:
    from _pytest.assertion import rewrite

    quiet = types.SimpleNamespace(trace=lambda *_: None)
    for path in paths:
        cache = rewrite.get_cache_dir(path)
        pyc = cache / (path.name[:-3] + rewrite.PYC_TAIL)
        if rewrite._read_pyc(path, pyc) is not None:
            continue  # already written, for this very source
        try:
            cache.mkdir(exist_ok=True)
            first, code = rewrite._rewrite_test(path, _config)  # type: ignore[arg-type]
        except (OSError, SyntaxError, ValueError):
            continue  # left to the worker's import, which reports it as pytest does
        rewrite._write_pyc(quiet, code, first, pyc)  # type: ignore[arg-type]


def rewrite_before_workers(config: pytest.Config) -> None:
    """In the controller of an xdist run: every test module's rewritten .pyc written, split across the CPUs."""
    global _config
    if os.environ.get("PYTEST_XDIST_WORKER") or not config.pluginmanager.has_plugin("dsession"):
        return  # a worker, or a run without workers: pytest rewrites as it imports, once
    from _pytest.assertion import rewrite

    used = ("get_cache_dir", "PYC_TAIL", "_read_pyc", "_rewrite_test", "_write_pyc")
    if not all(hasattr(rewrite, name) for name in used):
        return
    paths = test_modules(config)
    processes = max(1, os.cpu_count() or 1)
    _config = config
    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("fork")) as pool:
        list(pool.map(_rewrite, [paths[i::processes] for i in range(processes)]))
