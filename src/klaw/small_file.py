"""Reading a small file of klaw's (engine.yaml, a note in the home) without trusting what stands at its path.

Anything can be put where klaw keeps a small file: a FIFO, whose open waits for a writer for ever (the engine
froze on `/status`, or never started, adversary25); a symlink to /dev/zero, read without end until memory runs
out; a folder. The file is opened without waiting (O_NONBLOCK: a FIFO's open returns at once; O_NOCTTY: a
terminal there does not become the process's own), checked on that descriptor to be a regular file (nothing
can be swapped in between), and read up to a cap. A symlink to a regular file is followed: an engine.yaml kept
among dotfiles is one. A refusal is an OSError whose `strerror` says what stands there or how large it is,
for the caller's message, which names the file and what to do (decision 453).

That message is written once, here (`refused`, decision 469): the file, what is wrong with it (not a regular
file, too big, not UTF-8, not valid JSON, not a JSON object) and the fix the caller gives. Six callers wrote
it six ways ("not text", "unreadable", "not JSON as klaw writes it (ValueError)"…).
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path


def read_small(path: Path, max_bytes: int) -> bytes:
    """The bytes of the regular file at `path` (FileNotFoundError when there is none), at most `max_bytes`;
    else an OSError saying why not, e.g. "not a regular file but a FIFO (named pipe)"."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        data = read_regular(fd, max_bytes + 1, str(path))
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise OSError(errno.EFBIG, f"larger than {size_words(max_bytes)}", str(path))
    return data


def read_regular(fd: int, max_bytes: int, name: str) -> bytes:
    """At most `max_bytes` of the file open (without waiting) at `fd`, left open, when it is a regular file;
    else an OSError naming `name` and what stands there. For a file opened some other way than by path (the
    prompt files, opened beneath the workspace)."""
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        code = errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL
        raise OSError(code, f"not a regular file but {_kind(mode)}", name)
    os.set_blocking(fd, True)
    with open(fd, "rb", closefd=False) as file:
        return file.read(max_bytes)


def what_is_wrong(problem: BaseException | str) -> str:
    """What is wrong with a small file `read_small` refused, or whose text was not UTF-8 or not JSON
    (`problem`: the exception, or the words for a check of the caller's own, e.g. "not a JSON object")."""
    if isinstance(problem, str):
        return problem
    if isinstance(problem, UnicodeDecodeError):
        return "not UTF-8 text"
    if isinstance(problem, json.JSONDecodeError):
        return f"not valid JSON at line {problem.lineno}"
    if isinstance(problem, ValueError | RecursionError):  # json.loads: a number past 4,300 digits, nesting too deep
        return "not valid JSON klaw can read (a number too long or nesting too deep)"
    if isinstance(problem, OSError) and problem.strerror:  # ours, or the system's ("Permission denied")
        return problem.strerror[0].lower() + problem.strerror[1:]
    return type(problem).__name__


def refused(name: str | Path, problem: BaseException | str, fix: str) -> str:
    """The sentence for a small file klaw will not take: `name` (its path, or what it is), what is wrong with
    it and `fix`, e.g. "/home/k/web_token cannot be read (not a regular file but a FIFO (named pipe)); remove
    it and start again…"."""
    return f"{name} cannot be read ({what_is_wrong(problem)}); {fix}"


def size_words(size: int) -> str:
    return f"{size // (1 << 20)} MiB" if size >= 1 << 20 and size % (1 << 20) == 0 else f"{size} bytes"


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "something other than a file"
