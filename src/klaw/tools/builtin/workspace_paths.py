"""What a workspace path given to file_read, file_write and file_list may be, judged as arguments are validated.

A path the system cannot take came back in Python's words ("OSError: [Errno 36] File name too long:
'xxx…'", "ValueError: embedded null byte") with a warning in the log as if klaw had failed
(adversary31): it is the model's bad input, so it is refused here, before approval is asked or the
tool runs, naming the rule broken (decision 523). `..` leading out is refused here too (decision 243).
"""

from __future__ import annotations

import os

MAX_PART_BYTES = 255  # NAME_MAX of Linux's file systems
MAX_PATH_BYTES = 4095  # PATH_MAX, less the terminating NUL


def a_path_the_system_takes(path: str) -> str:
    """`path` unless the system would refuse it whatever the workspace holds: a NUL, a character that is
    not text (a lone surrogate), a part past 255 bytes or the whole past 4095 bytes (UTF-8)."""
    if "\x00" in path:
        raise ValueError("the path holds a NUL character (\\x00), which no file name may; give the path without it")
    try:
        encoded = path.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"the path holds {path[exc.start]!r} at character {exc.start}, half of a character pair, which is"
            " not text; give the path as plain text"
        ) from None
    if len(encoded) > MAX_PATH_BYTES:
        raise ValueError(f"the path is {len(encoded):,} bytes long; a path may be at most {MAX_PATH_BYTES:,} bytes")
    for part in encoded.split(b"/"):
        if len(part) > MAX_PART_BYTES:
            shown = part[:40].decode("utf-8", errors="ignore")
            raise ValueError(
                f"the path part {shown!r}… is {len(part):,} bytes long; a file or folder name may be at most"
                f" {MAX_PART_BYTES} bytes (UTF-8): use a shorter name"
            )
    return path


def not_climbing_out(path: str) -> str:
    """A path whose `..` leads out of the workspace whatever the workspace is: refused as the arguments
    are validated, so such a call is never put to the person for approval (ToolRegistry.refuse) only
    to fail once approved. Symlinks and absolute paths are judged when the tool runs."""
    normal = os.path.normpath(path)
    if not os.path.isabs(normal) and (normal == os.pardir or normal.startswith(os.pardir + os.sep)):
        raise ValueError(f"{path!r} is outside the workspace; use a path relative to the workspace")
    return path
