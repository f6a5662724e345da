"""The system prompt: the workspace files that give the agent its character and instructions.

SOUL.md (character), IDENTITY.md (name and tone) and AGENTS.md (instructions) are joined in that
order. They are re-read when they change on disk (checked by modification time), so a person can
edit them while the engine runs. `appendix` is what the engine itself adds after them (how to use
the docs tools, when they are offered).

They are read beneath the workspace (klaw/tools/beneath.py, decision 243): code run by `code_execute`
can put a symlink in place of a missing prompt file, and a file leading outside the workspace (the
web token, say) must not become part of every prompt sent to the model; it is left out, with a
warning naming the file.

Each is read up to `MAX_PROMPT_FILE_BYTES`: a person's log pasted into AGENTS.md by mistake (50 MB) went
whole into every prompt of every chat. A longer file gives its first 64 KiB, followed by a line telling the
model the rest is left out; `/status` says which file and what to do. Something there that is not a regular
file (a FIFO, whose read waited for a writer, a folder) is left out the same way (small_file.py, decision 460).
"""

from __future__ import annotations

import asyncio
import codecs
import logging
import os
from pathlib import Path

from klaw.small_file import read_regular, refused
from klaw.tools.beneath import open_directory, walk

log = logging.getLogger(__name__)

PROMPT_FILES = ("SOUL.md", "IDENTITY.md", "AGENTS.md")
FALLBACK_PROMPT = "You are a helpful personal assistant."
MAX_PROMPT_FILE_BYTES = 64 * 1024
"""What of each prompt file goes into a prompt: ~16,000 tokens, twice what OpenAI's Codex reads of all its
AGENTS.md files together (32 KiB), far more than the shipped files (1,098 bytes in all)."""


class SystemPrompt:
    def __init__(self, workspace: Path, appendix: str | None = None) -> None:
        self.workspace = workspace
        self._appendix = appendix
        self._cache: tuple[tuple[float, ...], str] | None = None
        self._notes: list[str] = []  # the prompt files cut or left out at the last read, for /status

    async def text(self) -> str:
        return await asyncio.to_thread(self.text_now)

    def text_now(self) -> str:
        """`text` on the calling thread (file checks: not on the event loop)."""
        paths = [self.workspace / name for name in PROMPT_FILES]
        stamps = tuple(p.stat().st_mtime if p.exists() else -1.0 for p in paths)
        if self._cache is not None and self._cache[0] == stamps:
            return self._cache[1]
        notes: list[str] = []
        parts = [_read_beneath(self.workspace, p.name, notes).strip() for p in paths if p.exists()]
        text = "\n\n".join(part for part in parts if part) or FALLBACK_PROMPT
        if self._appendix:
            text = f"{text}\n\n{self._appendix}"
        self._cache, self._notes = (stamps, text), notes
        return text

    def status_lines(self) -> list[str]:
        """`/status`'s lines for the prompt files cut at `MAX_PROMPT_FILE_BYTES` or left out, as the last
        turn read them (read again here when one changed since: at most the cap of each)."""
        try:
            self.text_now()
        except (OSError, UnicodeDecodeError) as exc:
            return [f"Prompt files: cannot be read now ({type(exc).__name__}); a turn fails the same way"]
        return list(self._notes)


def _read_beneath(workspace: Path, name: str, notes: list[str]) -> str:
    """The prompt file `name` read through a descriptor opened beneath the workspace, up to the cap (a line
    in `notes` when cut); "" when it leads outside (warned), is gone meanwhile or is not a regular file
    (a line in `notes`). An undecodable file raises, as before."""
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
    try:
        data = read_regular(fd, MAX_PROMPT_FILE_BYTES + 1, name)
        size = os.fstat(fd).st_size
    except OSError as exc:  # a FIFO, a device, a folder: nothing of it goes in, and the turn goes on
        said = refused(f"Prompt file {name}", exc, "it is left out of the prompt: put a file there or remove it")
        log.warning("%s", said)
        notes.append(said)
        return ""
    finally:
        os.close(fd)
    if len(data) <= MAX_PROMPT_FILE_BYTES:
        return data.decode("utf-8")
    cap = f"{MAX_PROMPT_FILE_BYTES // 1024} KiB"
    whole = f"{size / (1 << 20):.1f} MiB" if size >= 1 << 20 else f"{size:,} bytes"
    log.warning("the prompt file %s is %s: only its first %s go into the system prompt", name, whole, cap)
    notes.append(
        f"Prompt file {name} is {whole}: only its first {cap} go into each prompt; shorten it (keep what the"
        " agent needs every turn there, the rest in a file of the workspace it can read when it needs it)"
    )
    head = codecs.getincrementaldecoder("utf-8")().decode(data[:MAX_PROMPT_FILE_BYTES])  # no half character
    return (
        f"{head.rstrip()}\n\n[klaw: the rest of {name} ({whole} in all) is left out: a prompt file is read up to {cap}]"
    )
