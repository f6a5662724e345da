"""The system prompt: the workspace files that give the agent its character and instructions.

SOUL.md (character), IDENTITY.md (name and tone) and AGENTS.md (instructions) are joined in that
order. They are re-read when they change on disk (checked by modification time, size and inode), so a person can
edit them while the engine runs. `appendix` is what the engine itself adds after them (how to use
the docs tools, when they are offered).

They are read beneath the workspace (klaw/tools/beneath.py, decision 243): code run by `code_execute`
can put a symlink in place of a missing prompt file, and a file leading outside the workspace (the
web token, say) must not become part of every prompt sent to the model; it is left out, with a
warning naming the file.

Each is read up to its cap: a person's log pasted into AGENTS.md by mistake (50 MB) went whole into every
prompt of every chat. The cap follows the model's context budget (decisions 473, 480): the files together may
use what the tools leave of half the budget the context is built in (`RESERVED_SHARE`), each at least
`PROMPT_FILE_SHARE` of it, and never more than `MAX_PROMPT_FILE_BYTES` (64 KiB was ~16.6k tokens, twice the default
8,192-token budget: the conversation was crowded out). A longer file gives its first part, followed by a line
telling the model the rest is left out and where file_read reads on; the chat is told once and `/status` says
which file, the contextBudget that holds it whole and what to do. Something there that is not a regular file
(a FIFO, whose read waited for a writer, a folder) is left out the same way (small_file.py, decision 460).
"""

from __future__ import annotations

import asyncio
import codecs
import errno
import logging
import os
from pathlib import Path

from klaw.log_format import LOG_FILE_ONLY, held_back
from klaw.small_file import read_regular, refused
from klaw.tools.beneath import open_directory, walk

log = logging.getLogger(__name__)

PROMPT_FILES = ("SOUL.md", "IDENTITY.md", "AGENTS.md")
FALLBACK_PROMPT = "You are a helpful personal assistant."
MAX_PROMPT_FILE_BYTES = 64 * 1024
"""The most of each prompt file that goes into a prompt, whatever the budget: ~16,000 tokens, twice what OpenAI's
Codex reads of all its AGENTS.md files together (32 KiB), far more than the shipped files (1,098 bytes in all)."""
PROMPT_FILE_SHARE = 8
"""A prompt file may always use 1/8 of the context budget (contextBudget less the builder's 10 % margin): at the
default 8,192 tokens that is 921 tokens, 3,684 bytes of English (decision 473), the floor of its cap."""
RESERVED_SHARE = 2
"""Half the budget is kept for what comes after the prompt files and the tools: core memory, the summary, the
skills, recalled memory, the conversation window and the message. The prompt files together may use the rest,
what the tools leave of the other half (decision 480): 1/8 a file cut a 4 KB AGENTS.md at the default budget
while the context used 3,124 of its 7,372 tokens."""
BYTES_PER_TOKEN = 4
"""A cap in tokens as bytes: `approximate_token_count` counts 4 ASCII characters a token and other characters at
two a token (2 to 4 bytes each), so a file cut at 4 bytes a token never counts more tokens than its share."""


def cap_bytes(budget_tokens: int | None, tools_tokens: int = 0, earlier_bytes: int = 0) -> int:
    """The bytes of a prompt file that go into a context of `budget_tokens` (None: `MAX_PROMPT_FILE_BYTES`) whose
    tools take `tools_tokens`, after `earlier_bytes` of the files before it: the room half the budget leaves
    (`RESERVED_SHARE`), never less than `PROMPT_FILE_SHARE` of the budget, never more than 64 KiB."""
    if budget_tokens is None:
        return MAX_PROMPT_FILE_BYTES
    floor = budget_tokens // PROMPT_FILE_SHARE
    room = budget_tokens - budget_tokens // RESERVED_SHARE - tools_tokens - earlier_bytes // BYTES_PER_TOKEN
    return max(1, min(MAX_PROMPT_FILE_BYTES, max(floor, room) * BYTES_PER_TOKEN))


def budget_for(size: int, tools_tokens: int, earlier_bytes: int) -> int | None:
    """The contextBudget (a multiple of 100, before the builder's margin) whose cap holds a file of `size` bytes
    whole; None over 64 KiB, which no budget holds."""
    from klaw.engine.context_cut import SAFETY_MARGIN  # the builder imports this module

    if size > MAX_PROMPT_FILE_BYTES:
        return None
    budget = 100
    while cap_bytes(int(budget * SAFETY_MARGIN), tools_tokens, earlier_bytes) < size:
        budget += 100
    return budget


class SystemPrompt:
    def __init__(self, workspace: Path, appendix: str | None = None, budget_tokens: int | None = None) -> None:
        """`budget_tokens`: the context budget `/status` reads the files for before any turn did (the default
        model's); each turn reads them for its own model's budget."""
        self.workspace = workspace
        self._appendix = appendix
        self._budget = budget_tokens
        self._tools = 0
        self._paths = tuple(workspace / name for name in PROMPT_FILES)
        self._cache: tuple[tuple[Stamp, ...], dict[tuple[int, int], tuple[str, tuple[str, ...]]]] = ((), {})
        self._notes: tuple[str, ...] = ()  # the prompt files cut or left out at the last read, for /status

    async def text(self, budget_tokens: int | None = None, tools_tokens: int = 0) -> str:
        return (await asyncio.to_thread(self.read, budget_tokens, tools_tokens))[0]

    def text_now(self, budget_tokens: int | None = None) -> str:
        """`text` on the calling thread (file checks: not on the event loop)."""
        return self.read(budget_tokens)[0]

    def read(self, budget_tokens: int | None = None, tools_tokens: int = 0) -> tuple[str, tuple[str, ...]]:
        """The system prompt for a context of `budget_tokens` whose tools take `tools_tokens`, and a sentence for
        each prompt file cut at its cap or left out (what `/status` says, and the chat is told once)."""
        paths = self._paths
        stamps = _stamps(paths)
        key = (-1 if budget_tokens is None else budget_tokens, tools_tokens)
        if self._cache[0] != stamps:
            self._cache = (stamps, {})
        read = self._cache[1].get(key)
        if read is None:
            notes: list[str] = []
            parts, earlier = [], 0
            for path in paths:
                if path.exists():
                    cap = _Cap(budget_tokens, tools_tokens, earlier)
                    part = _read_beneath(self.workspace, path.name, notes, cap).strip()
                    parts.append(part)
                    earlier += len(part.encode("utf-8"))
            text = "\n\n".join(part for part in parts if part) or FALLBACK_PROMPT
            if self._appendix:
                text = f"{text}\n\n{self._appendix}"
            read = self._cache[1][key] = (text, tuple(notes))
        self._budget, self._tools, self._notes = budget_tokens, tools_tokens, read[1]
        return read

    def kept(self, budget_tokens: int | None = None, tools_tokens: int = 0) -> tuple[str, tuple[str, ...]] | None:
        """`read`'s answer from its cache when no prompt file changed since it was read (three `stat` calls, no
        read: what the event loop may do itself, decision 481); None when one changed, or a `stat` failed (`read`,
        on a worker thread, reads them or says why not)."""
        try:
            stamps = _stamps(self._paths)
        except OSError:
            return None
        cached = self._cache
        key = (-1 if budget_tokens is None else budget_tokens, tools_tokens)
        read = cached[1].get(key) if cached[0] == stamps else None
        if read is not None:
            self._budget, self._tools, self._notes = budget_tokens, tools_tokens, read[1]
        return read

    def status_lines(self) -> list[str]:
        """`/status`'s lines for the prompt files cut at their cap or left out, as the last turn read them (read
        again here when one changed since: at most the cap of each)."""
        try:
            self.read(self._budget, self._tools)
        except (OSError, UnicodeDecodeError) as exc:
            return [f"Prompt files: cannot be read now ({type(exc).__name__}); a turn fails the same way"]
        return list(self._notes)


Stamp = tuple[int, int, int, int]
"""A prompt file's modification and change times (ns), size and inode: an edit in place, even one whose modification
time is put back, or a file renamed over it changes it; (-1, 0, 0, 0) when there is none."""
_MISSING: Stamp = (-1, 0, 0, 0)


def _stamps(paths: tuple[Path, ...]) -> tuple[Stamp, ...]:
    """Each file's `Stamp`, one `stat` each: a missing one is what `Path.exists` calls missing (a dangling or
    looping symlink too); any other failure (no permission) raises, as `Path.stat` did."""
    stamps = []
    for path in paths:
        try:
            found = os.stat(path)
        except OSError as exc:
            if exc.errno not in _MISSING_ERRNOS:
                raise
            stamps.append(_MISSING)
        else:
            stamps.append((found.st_mtime_ns, found.st_ctime_ns, found.st_size, found.st_ino))
    return tuple(stamps)


_MISSING_ERRNOS = frozenset((errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP))  # Path.exists' "missing"


class _Cap:
    """A file's cap and what it is made of, for the words when it cuts."""

    def __init__(self, budget: int | None, tools: int, earlier: int) -> None:
        self.budget, self.tools, self.earlier = budget, tools, earlier
        self.bytes = cap_bytes(budget, tools, earlier)

    def why(self) -> str:
        if self.budget is None or self.bytes == MAX_PROMPT_FILE_BYTES:
            return "a prompt file is read up to 64 KiB"
        return (
            f"the prompt files may use what the tools leave of half the model's context budget, at least"
            f" 1/{PROMPT_FILE_SHARE} of it a file: ~{self.bytes // BYTES_PER_TOKEN:,} tokens here"
        )

    def larger(self, size: int) -> str:
        """The way out by budget, with the figure that would hold the file whole (check52, decision 480)."""
        if self.budget is None or self.bytes == MAX_PROMPT_FILE_BYTES:
            return ""
        needed = budget_for(size, self.tools, self.earlier)
        whole = "none holds it whole: 64 KiB at most" if needed is None else f"contextBudget: {needed} holds it whole"
        return f", or give the model a larger contextBudget in engine.yaml ({whole})"


def _read_beneath(workspace: Path, name: str, notes: list[str], capped: _Cap) -> str:
    """The prompt file `name` read through a descriptor opened beneath the workspace, up to `cap` bytes (a line
    in `notes` when cut); "" when it leads outside (warned), is gone meanwhile or is not a regular file
    (a line in `notes`), or is not UTF-8 text (left out and named, as a skill file is: decision 503; before,
    every turn failed with an error id and a UnicodeDecodeError in chat.log)."""
    root_path = workspace.resolve()
    root = open_directory(root_path)
    try:
        found = walk(root, root_path, name)
        try:
            fd = found.open(os.O_RDONLY | os.O_NONBLOCK)
        finally:
            found.close()
    except PermissionError as exc:
        if exc.errno is not None:
            raise
        log.warning("%s leads outside the workspace (a symlink?); it is left out of the system prompt", name)
        return ""
    except FileNotFoundError:
        return ""
    finally:
        os.close(root)
    cap = capped.bytes
    try:
        data = read_regular(fd, cap + 1, name)
        size = os.fstat(fd).st_size
    except OSError as exc:  # a FIFO, a device, a folder: nothing of it goes in, and the turn goes on
        said = refused(f"Prompt file {name}", exc, "it is left out of the prompt: put a file there or remove it")
        log.warning("%s", said, extra=LOG_FILE_ONLY)  # the chat is told (decision 473)
        notes.append(said)
        return ""
    finally:
        os.close(fd)
    try:
        if len(data) <= cap:
            return data.decode("utf-8")
        head = codecs.getincrementaldecoder("utf-8")().decode(data[:cap])  # no half character
    except UnicodeDecodeError as exc:
        said = not_utf8(f"{workspace.name}/{name}", exc.start)
        log.warning("%s", said, extra=LOG_FILE_ONLY)  # the chat is told, and /status and config check say it
        notes.append(said)
        return ""
    whole, part, why = _size(size), _size(cap), capped.why()
    log.warning(
        "the prompt file %s is %s: only its first %s go into the system prompt", name, whole, part, extra=LOG_FILE_ONLY
    )
    notes.append(
        f"Prompt file {workspace.name}/{name} is {whole}: only its first {part} go into each prompt ({why}); shorten"
        " it (keep what the agent needs every turn there, the rest in a file of the workspace it can read when it"
        f" needs it){capped.larger(size)}"
    )
    return (
        f"{head.rstrip()}\n\n[klaw: the rest of {name} ({whole} in all) is left out: {why}; file_read reads it:"
        f" path {name!r}, offset={len(head)}]"
    )


def left_out(workspace: Path) -> list[str]:
    """The notes of the prompt files every turn leaves out (not UTF-8 text, not a regular file), for `klaw config
    check` (decision 503): the file stays valid, the agent goes without that file. Read with this module's
    warnings held back: the caller says them."""
    try:
        with held_back(__name__, level=logging.CRITICAL):
            notes = SystemPrompt(workspace).read()[1]
    except OSError:
        return []
    return [note for note in notes if "left out of the prompt" in note]


def not_utf8(shown: str, at: int) -> str:
    """The note for a prompt file that is not UTF-8 text: which file, where, what is done, how to fix it."""
    return (
        f"Prompt file {shown} is not UTF-8 text (byte {at:,} cannot be decoded): it is left out of the prompt;"
        " save it as UTF-8"
    )


def _size(size: int) -> str:
    if size >= 1 << 20:
        return f"{size / (1 << 20):.1f} MiB"
    return f"{size // 1024} KiB" if size % 1024 == 0 else f"{size:,} bytes"
