"""The terminal `klaw chat` runs in: its output kept blocking, and the terminal left as it was found.

A terminal's stdin, stdout and stderr are usually one open file description (the shell dup'ed them
from one `open` of /dev/pts/N), and O_NONBLOCK belongs to the description, not to a descriptor. uvloop
(libuv) makes a file descriptor non-blocking when it is watched for reading, and prompt_toolkit and the
keys typed while the model thinks (`console_keys.py`) watch stdin, so stdout became non-blocking too:
a long reply written faster than the terminal took it (a slow ssh link, a busy tmux) hit EAGAIN, and
rich lost the rest of it and the prompt after it, with the whole reply in the log. And the flag outlived
`klaw chat`: the person's shell was left with a non-blocking terminal (bash: "read error: Resource
temporarily unavailable"; the next `cat` of a big file cut short).

So, at a terminal: stdout and stderr are opened again by the terminal's name, each their own
description whose blocking mode nothing else changes, and on the way out stdin gets back the mode it
had. Where the terminal has no name (`ttyname` fails) the descriptors stay as they are.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

STREAMS = {1: sys.stdout, 2: sys.stderr}


@contextlib.contextmanager
def terminal_kept() -> Iterator[None]:
    """For the whole of a `klaw chat` at a terminal; a no-op for pipes and files."""
    found = {fd: os.get_blocking(fd) for fd in (0, 1, 2) if _is_terminal(fd)}
    for fd in (1, 2):
        if fd in found:
            _apart(fd)
    try:
        yield
    finally:
        for fd, blocking in found.items():
            with contextlib.suppress(OSError):  # the terminal hung up: nobody is left to find it changed
                os.set_blocking(fd, blocking)


def _is_terminal(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _apart(fd: int) -> None:
    """Point `fd` at a description of its own on the same terminal, blocking."""
    try:
        own = os.open(os.ttyname(fd), os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return
    stream = STREAMS[fd]
    with contextlib.suppress(OSError, ValueError):
        stream.flush()
    try:
        os.dup2(own, fd)  # fds 0–2 stay inheritable: a program the agent runs gets the terminal as before
    finally:
        os.close(own)
