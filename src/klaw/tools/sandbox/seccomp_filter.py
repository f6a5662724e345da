"""The bubblewrap sandbox's seccomp filter: system calls that hold the host's memory outside every limit, refused.

`prlimit --as` bounds what a process maps; `/tmp` and `/dev/shm` are tmpfs of `sandbox.tmpMb`. Some memory is
none of these: a `memfd_create` file written with write() (never mapped), SysV shared memory detached after
filling and semaphore arrays (an IPC namespace of its own has the kernel's default limits, about unlimited),
keys in the kernel's keyrings (not namespaced: they outlive the run), extended attributes on the tmpfs files
(kernel memory, not the tmpfs's blocks). Without a memory cgroup (a normal
user's klaw) code could hold such memory until its wall time ends. So bwrap is handed (`--seccomp FD`) a
BPF program, built by libseccomp (through the PyPI package pyseccomp, ctypes over Debian's libseccomp2),
that makes those calls fail with EPERM, and io_uring's with ENOSYS, as on a kernel without it, so programs
take their usual fallback; setting an extended attribute fails with ENOTSUP, as on a file system without
them. userfaultfd, bpf and perf_event_open go too: code run here does not need them, and they mostly serve
exploits.
Other architectures' calls (32-bit, x32) kill the caller: libseccomp's default for a foreign architecture.

Where the package or the library is missing, the sandbox still runs without the filter, and
`klaw sandbox status` says what is then not refused (decision 419).
"""

from __future__ import annotations

import errno
import functools
import tempfile
from dataclasses import dataclass
from typing import Any

REFUSED = (
    "memfd_create",
    "memfd_secret",
    "shmget",
    "semget",
    "msgget",
    "add_key",
    "request_key",
    "keyctl",
    "userfaultfd",
    "bpf",
    "perf_event_open",
)
ABSENT = ("io_uring_setup", "io_uring_enter", "io_uring_register")
# Extended attributes on the sandbox's tmpfs are kernel memory, not tmpfs blocks: 1.5 GiB of `user.*` values in
# /tmp held the host's memory with tmpMb untouched (adversary20). ENOTSUP is what a file system without them
# answers: shutil.copy2, cp -a, tar and pip go on without copying attributes.
NO_XATTRS = ("setxattr", "lsetxattr", "fsetxattr", "setxattrat")
_ESSENTIAL = "memfd_create"


@dataclass(frozen=True, slots=True)
class SeccompFilter:
    """The compiled program (None: no filter, `missing` says why) and the calls it refuses."""

    program: bytes | None
    refused: tuple[str, ...] = ()
    missing: str = ""

    def describe(self) -> str:
        """One line for `klaw sandbox status`."""
        if self.program is None:
            return (
                f"NO seccomp filter ({self.missing}): code can hold the host's memory outside sandbox.memoryMb in"
                " memfd_create files and SysV shared memory until its wall time ends (docs/sandbox.md)"
            )
        return "seccomp filter refuses " + ", ".join(self.refused)


@functools.cache
def seccomp_filter() -> SeccompFilter:
    """Built once per process: the same program for every run."""
    try:
        import pyseccomp
    except ImportError:
        return SeccompFilter(None, missing="the Python package pyseccomp is not installed: pip install pyseccomp")
    except (RuntimeError, OSError):  # pyseccomp raises RuntimeError when it finds no libseccomp
        return SeccompFilter(None, missing="libseccomp is not installed: apt install libseccomp2")
    return _build(pyseccomp)


def without_filter(reason: str) -> SeccompFilter:
    return SeccompFilter(None, missing=reason)


def _build(seccomp: Any) -> SeccompFilter:
    """`seccomp`: the pyseccomp module (untyped: ctypes over libseccomp)."""
    rules = [(name, errno.EPERM) for name in REFUSED] + [(name, errno.ENOSYS) for name in ABSENT]
    rules += [(name, errno.ENOTSUP) for name in NO_XATTRS]
    refused: list[str] = []
    try:
        program = seccomp.SyscallFilter(seccomp.ALLOW)
        for name, number in rules:
            try:
                program.add_rule(seccomp.ERRNO(number), name)
            except (
                OSError,
                ValueError,
            ):  # a call this libseccomp does not know (memfd_secret before 2.5.2, setxattrat)
                if name == _ESSENTIAL:
                    raise
                continue
            refused.append(name)
        with tempfile.TemporaryFile() as file:
            program.export_bpf(file)
            file.seek(0)
            compiled = file.read()
    except (OSError, ValueError) as exc:
        return SeccompFilter(None, missing=f"libseccomp could not build it ({exc})")
    return SeccompFilter(compiled, tuple(refused))
