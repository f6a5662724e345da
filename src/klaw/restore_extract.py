"""A checked archive's members written into the restore's hidden folder, private whatever the archive's modes
or the umask, each one looked at a second time as it is written (decisions 522, 524, 537).

tarfile's extraction filters (`extractall(filter=…)`, `tarfile.data_filter`, `tarfile.FilterError`) arrived in
Python 3.11.4, and Debian 12's own python3 is 3.11.2: there `klaw restore` failed on every archive with a
TypeError (decision 537). Where tarfile has them, its `data` filter makes the second look, as before; where
it has not, the same look is made here: a member's real path (links followed, as the links before it were
written) must stay in the folder, and so must what a link points at. Either way a member found leading out is
`RestoreError` with tarfile's own words, never "damaged" (a `FilterError` is a `TarError`, which
home_restore's reader takes for a damaged archive), and the hidden folder is then removed by home_restore.
"""

from __future__ import annotations

import copy
import os
import tarfile
from collections.abc import Callable, Iterable
from pathlib import Path

HAS_FILTERS = hasattr(tarfile, "data_filter")  # Python 3.11.4+, 3.12+; not Debian 12's 3.11.2
# tarfile's refusal by a filter: a TarError, so caught here before home_restore's reader calls it damage.
_FILTER_ERROR: tuple[type[Exception], ...] = (tarfile.FilterError,) if HAS_FILTERS else ()


def write_private(
    archive: Path, stream: tarfile.TarFile, members: Iterable[tarfile.TarInfo], staging: Path, *, links: bool
) -> None:
    """`members` of `stream` into `staging`: folders 0700, files 0600 (0700 when the owner could run them),
    owned by whoever restores, each file's time kept. With `links`, each member's real path is checked as it
    is written: resolving it costs a look at every folder above it, so an archive of a folder 1,100 deep took
    two minutes (decision 524); without a link in the archive the real path is the name, which home_restore's
    checking pass confined already (no `..`, not absolute)."""
    from klaw.home_restore import RestoreError

    try:
        if HAS_FILTERS:
            stream.extractall(staging, members=members, filter=_tarfile_filter(links))
        else:  # each member checked and made private by the generator just before extractall writes it
            root = os.path.realpath(staging)
            checked = (_checked(archive, member, root, links) for member in members)
            stream.extractall(staging, members=checked, numeric_owner=True)
    except _FILTER_ERROR as exc:
        raise RestoreError(f"{archive}: {exc}: not restored, nothing was written") from None


def _mode(member: tarfile.TarInfo) -> int:
    if member.isdir():
        return 0o700
    return 0o700 if member.mode & 0o100 else 0o600


def _tarfile_filter(links: bool) -> Callable[[tarfile.TarInfo, str], tarfile.TarInfo]:
    def private(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo:
        if links:
            member = tarfile.data_filter(member, path)
        else:
            member = member.replace(uid=None, gid=None, uname=None, gname=None, deep=False)  # type: ignore[arg-type]
        if member.isdir() or member.isreg() or member.islnk():
            return member.replace(mode=_mode(member), deep=False)
        return member

    return private


def _checked(archive: Path, member: tarfile.TarInfo, root: str, links: bool) -> tarfile.TarInfo:
    """`member` made private, after `data_filter`'s look at where it and its link lead (with `links`), in its
    words. Owner: the restoring user (extractall changes it only for root; `numeric_owner`: names not looked up)."""
    if links:
        _inside(archive, root, member.name, f"{member.name!r} would be extracted to")
        if member.issym():
            _inside(
                archive,
                root,
                os.path.join(os.path.dirname(member.name), member.linkname),
                f"{member.name!r} would link to",
            )
        elif member.islnk():
            _inside(archive, root, member.linkname, f"{member.name!r} would link to")
    private = copy.copy(member)
    private.uid, private.gid, private.uname, private.gname = os.getuid(), os.getgid(), "", ""
    if member.isdir() or member.isreg() or member.islnk():
        private.mode = _mode(member)
    return private


def _inside(archive: Path, root: str, name: str, what: str) -> None:
    """`RestoreError` unless `name`, resolved below `root` as the disk now stands, stays below it."""
    real = os.path.realpath(os.path.join(root, name))
    if os.path.commonpath([root, real]) != root:
        from klaw.home_restore import RestoreError

        raise RestoreError(
            f"{archive}: {what} {real!r}, which is outside the destination: not restored, nothing was written"
        )
