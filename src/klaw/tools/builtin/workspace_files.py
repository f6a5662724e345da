"""`file_read`, `file_write`, `file_list`: the agent's notes and files, confined to its workspace.

No path string is ever opened: each path is walked beneath a descriptor of the workspace, one
component at a time with O_NOFOLLOW, symlinks read and followed by the walk itself
(klaw/tools/beneath.py), and the file read or written through the descriptor that walk opened. So
neither `../`, an absolute path elsewhere, a symlink planted inside pointing out, nor `code_execute`
swapping a folder for a symlink while a tool runs can reach the rest of the disk (decision 243);
a symlink inside pointing inside still works.

Only UTF-8 text is handled: the model can do nothing useful with raw bytes, and a binary file
decoded as text would waste its context. Writes are capped at 1 MiB to keep a looping model from
filling the disk. All file I/O runs in `asyncio.to_thread`, off the event loop; only regular files
are opened (`_regular`), so a FIFO or device planted in the workspace cannot hold those threads.

The prompt files (SOUL.md, IDENTITY.md, AGENTS.md) go into every turn of every chat, so a write there
would carry an instruction injected into one turn (a web page, a forwarded message) into all later ones:
`file_write` refuses them (judged on the folder really reached and the file really opened, so a symlink
or hard link to them is refused too) unless the person
set `tools.allowPromptEdits`, when the engine registers `file_writer(protected=())` instead. The skills
folder (`skills/`, a protected name ending in "/") is refused the same way, for the same reason: each
skill's description goes into every turn. Nothing beneath it is written and no folder is made in it,
judged on the folders really reached (by identity, so a symlink to it is refused too), before any
folder is made and again once the file is opened (decision 279).
"""

from __future__ import annotations

import asyncio
import errno
import io
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, Field

from klaw.atomic_file import replace_at
from klaw.home_init import PROTECTED_WORKSPACE
from klaw.home_init import WORKSPACE_FILES as PROMPT_FILES
from klaw.private_files import FILE_MODE, private_dirs
from klaw.tools.beneath import Outside, Walk, open_directory, walk
from klaw.tools.builtin.workspace_paths import a_path_the_system_takes, not_climbing_out
from klaw.tools.calls import ToolRefusal
from klaw.tools.disk_room import DiskRoom, one_writer
from klaw.tools.schema import ToolContext, ToolFunction

MAX_WRITE_BYTES = 1024 * 1024
MAX_LIST_ENTRIES = 500
_SNIFF_BYTES = 8192
_SKIP_CHUNK = 65536


def _not_protected(protected: tuple[str, ...]) -> Callable[[str], str]:
    """A validator refusing a path that names a `protected` file or lies beneath a protected folder as
    written: refused as the arguments are validated, so nobody is asked to approve a write that would be
    refused once approved (decision 348). A symlink or hard link to them is still judged as the tool runs."""
    folders = {name.rstrip("/") for name in protected if name.endswith("/")}
    files = {name for name in protected if not name.endswith("/")}

    def check(path: str) -> str:
        normal = os.path.normpath(path)
        head = normal.split(os.sep, 1)[0]
        if normal in files or head in folders:
            raise ValueError(
                f"{normal!r} is a prompt file or in the skills/ folder, which go into every turn of every chat, so"
                " tools may not change it (tools.allowPromptEdits in engine.yaml allows it, then restart klaw). Tell"
                " the person what to write and they can make the change, or write it elsewhere in the workspace"
            )
        return path

    return check


MAX_READ_CHARS = 1_000_000
"""The most characters one file_read asks for (a result is cut far shorter anyway): 10**30 made
Python's read() raise OverflowError, which the model read as "OverflowError: cannot fit 'int' …"."""

PathArg = Annotated[
    str,
    AfterValidator(a_path_the_system_takes),  # decision 523
    AfterValidator(not_climbing_out),
    Field(description="Relative to the workspace"),
]


async def file_read(
    context: ToolContext,
    path: PathArg,
    offset: Annotated[int, Field(ge=0)] = 0,
    limit: Annotated[
        int, Field(ge=1, le=MAX_READ_CHARS)
    ] = 12000,  # under the registry's 16,000-character cap: the note survives
) -> str:
    """Read a workspace text file; offset and limit count characters (a cut reply says where to go on)."""
    return await asyncio.to_thread(_read, context.workspace, path, offset, limit)


def file_writer(protected: tuple[str, ...] = PROTECTED_WORKSPACE, room: DiskRoom | None = None) -> ToolFunction:
    """`file_write`, refusing the `protected` workspace files, and what lies beneath the protected
    folders (names ending in "/"): the prompt files and skills/ unless told otherwise; with `room`, a
    write that would pass the workspace's quota or leave its disk under the floor (decision 327)."""

    async def file_write(
        context: ToolContext,
        path: PathArg,
        content: Annotated[str, Field(description="At most 1 MiB")],
        append: bool = False,
    ) -> str:
        """Write a workspace text file (folders made); replaces it unless append."""
        return await _file_write(context, path, content, append, protected=protected, room=room)

    # The path of this writer also refuses its protected names as arguments are validated: an object,
    # not a string, since the names of this function's scope cannot be resolved from the annotation.
    file_write.__annotations__["path"] = Annotated[PathArg, AfterValidator(_not_protected(protected))]
    return file_write


file_write = file_writer()


async def _file_write(
    context: ToolContext, path: str, content: str, append: bool, protected: tuple[str, ...], room: DiskRoom | None
) -> str:
    data = content.encode("utf-8")
    if len(data) > MAX_WRITE_BYTES:
        raise ToolRefusal(f"the content is {len(data)} bytes; one write may be at most {MAX_WRITE_BYTES} bytes (1 MiB)")
    if room is None:
        return await asyncio.to_thread(_write, context.workspace, path, data, append, protected)
    async with one_writer(context.workspace):  # measured and written one at a time: 32 at once all fitted
        now, (held, missing) = await asyncio.to_thread(
            lambda: (room.measure(context.workspace), _already(context.workspace, path))
        )  # the net change: a replaced file's blocks are freed (decision 362), once its copy is written (371)
        refused = now.refusal(len(data) if append else len(data) - held, missing, needs=len(data))
        if refused is not None:
            raise ToolRefusal(f"{_normal(path)!r} was not written: {refused}.")
        return await asyncio.to_thread(_write, context.workspace, path, data, append, protected)


def _already(workspace: Path, path: str) -> tuple[int, int]:
    """What a write to `path` finds there: the bytes the file's blocks hold now (0: none, or not a regular
    file), and how many files and folders it would make (the file and the folders missing on the way).
    Each path reached beneath the workspace as the write reaches it, the last component not opened (O_PATH).
    Blocking."""
    parts = [part for part in _normal(path).split(os.sep) if part not in ("", ".")]
    for depth in range(len(parts), 0, -1):
        try:
            with _beneath(workspace, os.sep.join(parts[:depth])) as found:
                fd = found.open(os.O_PATH)
        except OSError:  # missing, outside (Outside), a file where a folder should be: the write says so
            continue
        try:
            info = os.fstat(fd)
        finally:
            os.close(fd)
        whole = depth == len(parts) and stat.S_ISREG(info.st_mode)
        return (info.st_blocks * 512 if whole else 0), len(parts) - depth
    return 0, len(parts)


async def file_list(
    context: ToolContext,
    path: PathArg = ".",
) -> str:
    """List a workspace folder: folders end in '/', files show their size."""
    return await asyncio.to_thread(_list, context.workspace, path)


@contextmanager
def _beneath(
    workspace: Path, path: str, *, make_folders: bool = False, protected: tuple[str, ...] = ()
) -> Iterator[Walk]:
    """`path` walked beneath the workspace (klaw/tools/beneath.py): no string path is opened, so code
    swapping a folder for a symlink meanwhile cannot lead the tool outside. No folder is made in a
    `protected` folder (a name ending in "/")."""
    root_path = workspace.resolve()
    root = open_directory(root_path)
    folders = _folders(protected)

    def before_make(found: Walk, name: str) -> None:
        _refuse_in_folder(found, folders, name)

    try:
        found = walk(root, root_path, path, make_folders=make_folders, before_make=before_make if folders else None)
        try:
            yield found
        finally:
            found.close()
    finally:
        os.close(root)


def _opened(workspace: Path, path: str, flags: int, looked_for: str) -> tuple[int, str]:
    """`path` opened beneath the workspace with `flags` for file_read and file_list: the descriptor (the
    caller closes it) and the path as really reached, or a refusal saying what is wrong: nothing there
    (`looked_for`: "file" or "folder"), a device without its hardware, symlinks leading round in a circle.
    A NotADirectoryError (file_list given a file) is left to the caller, which knows what to suggest."""
    try:
        with _beneath(workspace, path) as found:
            return found.open(flags), found.shown
    except Outside as exc:
        raise ToolRefusal(str(exc)) from None
    except FileNotFoundError:
        raise ToolRefusal(f"there is no {looked_for} {_normal(path)!r} in the workspace") from None
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a device without its hardware
            raise ToolRefusal(_not_regular(_normal(path))) from None
        if exc.errno == errno.ELOOP:  # beneath.py's own words, without "[Errno 40]"
            loop = "a symlink on the way leads back round (a loop); use another path"
            raise ToolRefusal(f"{exc.strerror}: {loop}") from None
        raise


def _read(workspace: Path, path: str, offset: int, limit: int) -> str:
    fd, shown = _opened(workspace, path, os.O_RDONLY | os.O_NONBLOCK, "file")
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        os.close(fd)
        raise ToolRefusal(f"{shown!r} is a folder; use file_list to see what it holds")
    with _regular(fd, shown, os.O_RDONLY) as raw:
        if b"\0" in raw.read(_SNIFF_BYTES):
            raise ToolRefusal(f"{shown!r} is a binary file; only text files can be read")
        raw.seek(0)
        text_file = io.TextIOWrapper(raw, encoding="utf-8", newline="")
        try:
            skipped = _skip(text_file, offset)
            text = text_file.read(limit)
            more = bool(text_file.read(1))
        except UnicodeDecodeError:
            raise ToolRefusal(f"{shown!r} is not UTF-8 text (a binary file?); only text files can be read") from None
    if skipped < offset:
        return f"[offset {offset} is past the end of {shown!r}, which has {skipped} characters]"
    if not text and offset == 0:
        return f"[{shown!r} is empty]"
    if more:
        return f"{text}\n[… {shown!r} continues: call file_read with offset={offset + len(text)} for more]"
    return text


def _regular(fd: int, shown: str, flags: int) -> io.BufferedReader | io.BufferedWriter:
    """The opened `fd` as an unbuffered file, or a clear refusal (fd closed) if it is not a regular file.

    Opening a FIFO blocks until its other end opens, and reading a device may never end: a few such
    calls would hold every worker thread they run on. The open is O_NONBLOCK, so it returns at once
    (a FIFO without a writer opens for reading; without a reader, opening to write fails with ENXIO),
    and fstat on the opened descriptor judges the very file opened, with no window for a swap."""
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ToolRefusal(_not_regular(shown))
    os.set_blocking(fd, True)
    if flags & os.O_WRONLY:
        return os.fdopen(fd, "ab" if flags & os.O_APPEND else "wb")  # "wb" on an fd does not truncate
    return os.fdopen(fd, "rb")


def _not_regular(shown: str) -> str:
    return f"{shown!r} is not a regular file (a pipe, socket or device); only regular files can be read or written"


def _normal(path: str) -> str:
    return os.path.normpath(path) if path else "."


def _skip(text_file: io.TextIOWrapper, count: int) -> int:
    """Skip `count` characters in bounded chunks (a huge offset must not load the whole file)."""
    skipped = 0
    while skipped < count:
        chunk = text_file.read(min(_SKIP_CHUNK, count - skipped))
        if not chunk:
            break
        skipped += len(chunk)
    return skipped


def _write(workspace: Path, path: str, data: bytes, append: bool, protected: tuple[str, ...]) -> str:
    flags = os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | (os.O_APPEND if append else 0)
    private_dirs(workspace)  # the workspace itself, if it is missing (the person's path: not the model's)
    try:
        with _beneath(workspace, path, make_folders=True, protected=protected) as found:
            _refuse_protected(found, protected, None)  # before the open: a missing prompt file is not created
            fd = found.open(flags, FILE_MODE)  # folders the agent makes are 0700, its files 0600 (decision 237)
            shown, name = found.shown, found.name
            try:
                _refuse_protected(found, protected, fd)  # the file really opened, however it was reached
                folder = os.dup(found.parent)  # where a replacement is made and renamed over it
            except (ToolRefusal, OSError):
                os.close(fd)
                raise
    except Outside as exc:
        raise ToolRefusal(str(exc)) from None
    except IsADirectoryError:
        raise ToolRefusal(f"{_normal(path)!r} is a folder; give a file name inside it") from None
    except FileNotFoundError:
        raise ToolRefusal(f"{_normal(path)!r} cannot be made: a file is where a folder should be") from None
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a FIFO nobody reads, or a device without its hardware
            raise ToolRefusal(_not_regular(_normal(path))) from None
        raise
    try:
        with _regular(fd, shown, flags) as file:
            old = os.fstat(file.fileno())
            if append:
                file.write(data)
            elif old.st_size == 0 or old.st_nlink > 1:  # nothing to lose, or one file of many names to keep one
                file.truncate(0)  # only now: a special file is refused before anything is changed
                file.write(data)
            else:
                replace_at(folder, name, data, old)  # the old file stays whole if this write fails
    finally:
        os.close(folder)
    return f"{'appended' if append else 'wrote'} {len(data)} bytes to {shown}"


def _refuse_protected(found: Walk, protected: tuple[str, ...], fd: int | None) -> None:
    """PermissionError when the write would change a prompt file: judged on the folder really reached
    (the workspace itself, by device and inode) and the name in it, and once opened on the file
    itself, compared with the prompt files the workspace holds (a hard link or a raced symlink too)."""
    if not protected:
        return
    _refuse_in_folder(found, _folders(protected), found.name)
    hit = found.name in protected and found.at_root()
    if fd is not None and not hit:
        opened = os.fstat(fd)
        for name in (name for name in protected if not name.endswith("/")):
            try:
                prompt = os.stat(name, dir_fd=found.root)  # a symlinked prompt file: the file it shows
            except OSError:
                continue
            hit = hit or (prompt.st_dev, prompt.st_ino) == (opened.st_dev, opened.st_ino)
    if hit:
        raise ToolRefusal(
            f"{found.shown} is one of the prompt files ({', '.join(PROMPT_FILES)}) that go into every turn of every"
            " chat, so tools may not change it (tools.allowPromptEdits in engine.yaml allows it, then restart"
            " klaw). Tell the person what to change and they can edit the file."
        )


def _folders(protected: tuple[str, ...]) -> tuple[str, ...]:
    """The protected folders' names ("skills/" gives "skills")."""
    return tuple(name.rstrip("/") for name in protected if name.endswith("/"))


def _refuse_in_folder(found: Walk, folders: tuple[str, ...], name: str) -> None:
    """ToolRefusal when the walk's current folder is a protected folder of the workspace or lies
    beneath one, judged by identity (device and inode of each folder the walk holds, so however the
    path got there, through symlinks too), or when `name` there would be one itself (at the root)."""
    if not folders:
        return
    hit = next((folder for folder in folders if name == folder and found.at_root()), None)
    held = {(st.st_dev, st.st_ino) for st in (os.fstat(fd) for fd, _ in found.stack)}
    for folder in folders if hit is None and held else ():
        try:
            there = os.stat(folder, dir_fd=found.root)  # a symlinked skills folder: the folder it shows
        except OSError:
            continue
        if (there.st_dev, there.st_ino) in held:
            hit = folder
            break
    if hit is not None:
        raise ToolRefusal(
            f"{found.shown} would change the {hit}/ folder, whose skills' descriptions go into every turn of every"
            " chat,"
            " so tools may not change it (tools.allowPromptEdits in engine.yaml allows it, then restart klaw). Tell"
            " the person what to write and they can add the skill (docs/skills.md), or write it elsewhere in the"
            " workspace."
        )


def _list(workspace: Path, path: str) -> str:
    try:
        fd, shown = _opened(workspace, path, os.O_RDONLY | os.O_DIRECTORY, "folder")
    except NotADirectoryError:
        raise ToolRefusal(f"{_normal(path)!r} is a file, not a folder; use file_read to read it") from None
    try:
        with os.scandir(fd) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
            lines = [_describe(entry) for entry in entries[:MAX_LIST_ENTRIES]]
    finally:
        os.close(fd)
    if not entries:
        return f"[{shown!r} is empty]"
    if len(entries) > MAX_LIST_ENTRIES:
        lines.append(f"[… and {len(entries) - MAX_LIST_ENTRIES} more entries]")
    return "\n".join(lines)


def _describe(entry: os.DirEntry[str]) -> str:
    # Symlinks are named, not followed: their target may be outside the workspace.
    if entry.is_symlink():
        return f"{entry.name}@ (symlink)"
    if entry.is_dir(follow_symlinks=False):
        return f"{entry.name}/"
    return f"{entry.name} ({entry.stat(follow_symlinks=False).st_size} bytes)"
