"""What bwrap is handed by descriptor rather than by path: its own options, and the /etc files klaw writes.

Code in the sandbox can read the command line and environment of every process there, bwrap's own
included (it is the sandbox's pid 1). With the options on that command line, `/proc/1/cmdline` showed
the workspace's path on the host (so KLAW_HOME's and the person's user name), the virtualenv's, where
the read-only copies lie, every bind. Given through `bwrap --args FD` they are read from a memory file
and never shown: the command line keeps only `bwrap --args N --` and the sandbox's own command.

The identity files are generated rather than bound from the host: `/etc/passwd` and `/etc/group` name
only the sandbox's user (and `nobody`, which files owned by unmapped users show as), not the host's
accounts; without a network, `/etc/hosts` names only `localhost` and the sandbox's hostname (the host's
names its machines). `/proc/cmdline`, the host kernel's boot options, reads as empty. bwrap copies
each into its own tmpfs (`--ro-bind-data`) and closes the descriptor before the code starts (decision 391).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from types import TracebackType

SANDBOX_USER = "sandbox"
HOSTNAME = "sandbox"
_NOBODY = 65534


class Descriptors:
    """Memory files for one bwrap start, each read from its beginning; pass `numbers` to the child
    (`pass_fds`: they are close-on-exec for every other process) and close them once it has started."""

    def __init__(self) -> None:
        self.numbers: list[int] = []

    def add(self, name: str, data: bytes) -> int:
        """A new memory file holding `data`: its descriptor number, the same in the child."""
        fd = os.memfd_create(f"klaw-{name}", os.MFD_CLOEXEC)
        self.numbers.append(fd)
        with open(fd, "wb", closefd=False) as file:  # a buffered write writes it all
            file.write(data)
        os.lseek(fd, 0, os.SEEK_SET)
        return fd

    def options(self, options: Sequence[str]) -> list[str]:
        """`--args N`: `options` read by bwrap from a memory file (NUL-separated), off its command line."""
        data = b"".join(option.encode() + b"\0" for option in options)
        return ["--args", str(self.add("bwrap-args", data))]

    def close(self) -> None:
        for fd in self.numbers:
            os.close(fd)
        self.numbers.clear()

    def __enter__(self) -> Descriptors:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


def generated_files(uid: int, gid: int, *, network: bool) -> dict[str, bytes]:
    """The files the sandbox gets from klaw rather than the host, by path inside: no host account, group,
    machine name or boot option. With `sandbox.network` the host's /etc/hosts (and resolv.conf) are
    bound instead, as names on that network resolve through them. After `--proc` (over its file)."""
    files = {
        "/etc/passwd": (
            f"{SANDBOX_USER}:x:{uid}:{gid}:{SANDBOX_USER}:/tmp:/bin/sh\n"
            f"nobody:x:{_NOBODY}:{_NOBODY}:nobody:/nonexistent:/usr/sbin/nologin\n"
        ),
        "/etc/group": f"{SANDBOX_USER}:x:{gid}:\nnogroup:x:{_NOBODY}:\n",
        "/etc/hostname": f"{HOSTNAME}\n",
        "/proc/cmdline": "",
    }
    if not network:
        files["/etc/hosts"] = f"127.0.0.1\tlocalhost {HOSTNAME}\n::1\tlocalhost ip6-localhost ip6-loopback\n"
    return {path: text.encode() for path, text in files.items()}


def data_options(descriptors: Descriptors, files: dict[str, bytes]) -> list[str]:
    """bwrap options putting each file at its path, read-only and world-readable, from a memory file."""
    args: list[str] = []
    for path, data in files.items():
        args += ["--perms", "0444", "--ro-bind-data", str(descriptors.add(path.rsplit("/", 1)[-1], data)), path]
    return args
