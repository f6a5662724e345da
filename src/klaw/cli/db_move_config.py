"""`klaw db migrate --to postgres`'s last step: engine.yaml switched to the PostgreSQL database it filled.

Before, the move ended by naming the line to change; a person who did not change it kept writing to
klaw.db with no word, and what they said meanwhile never reached PostgreSQL (newcomer19, decision 476).
Now the move writes `backend: postgres` and `urlEnv` itself: only those lines of the `database:` section
change (or the section is added at the end), every other byte and comment is kept, the file as it was is
copied beside it (`engine.yaml.bak-<UTC time>`), and the result is read back as klaw reads it. A file
it cannot edit so (a `database: {…}` on one line, a setting it does not read back) is left alone, and the
line to change is named as before.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from klaw.atomic_file import kept_copy_name, replace_file
from klaw.private_files import write_private

_SECTION = re.compile(r"database:[ \t]*(#.*)?$")
_KEY = re.compile(r"(?P<indent>[ \t]+)(?P<key>[A-Za-z]+):(?P<gap>[ \t]*)(?P<value>[^#\n]*?)(?P<tail>[ \t]*#.*)?$")


@dataclass(frozen=True, slots=True)
class Switched:
    """engine.yaml now names PostgreSQL; `kept` is the file as it was, beside it (None: there was none)."""

    config_file: Path
    kept: Path | None


def switch_to_postgres(config_file: Path, variable: str) -> Switched | None:
    """engine.yaml's `database:` set to backend postgres with urlEnv `variable`, everything else kept;
    None when the file cannot be edited so (then the caller names the line to change)."""
    try:
        before = config_file.read_bytes() if config_file.exists() else b""
        text = before.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    edited = _edited(text, variable)
    if edited is None or not _reads_back(edited, variable):
        return None
    kept = None
    if before:
        kept = kept_copy_name(config_file)
        write_private(kept, before)
    replace_file(config_file, edited.encode("utf-8"))
    return Switched(config_file, kept)


def _edited(text: str, variable: str) -> str | None:
    lines = text.splitlines(keepends=True)
    start = next((n for n, line in enumerate(lines) if _SECTION.match(line.rstrip("\n"))), None)
    if start is None:
        if re.search(r"(?m)^database\s*:", text):
            return None  # a `database: {…}` on one line: not edited by line
        ending = "" if not text or text.endswith("\n") else "\n"
        return f"{text}{ending}database:\n  backend: postgres\n  urlEnv: {variable}\n"
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or lines[end][0] in " \t#"):
        end += 1
    keys = {m["key"]: n for n in range(start + 1, end) if (m := _KEY.match(lines[n].rstrip("\n")))}
    indent = next((m["indent"] for n in range(start + 1, end) if (m := _KEY.match(lines[n].rstrip("\n")))), "  ")
    for key, value in (("backend", "postgres"), ("urlEnv", variable)):
        if key in keys:
            lines[keys[key]] = _with_value(lines[keys[key]], value)
        else:
            after = keys.get("backend", start)
            lines.insert(after + 1, f"{indent}{key}: {value}\n")
            keys = {k: (n + 1 if n > after else n) for k, n in keys.items()} | {key: after + 1}
    return "".join(lines)


def _with_value(line: str, value: str) -> str:
    """`line` with its value replaced, its comment kept in its column when there is room."""
    body, newline = (line[:-1], "\n") if line.endswith("\n") else (line, "")
    match = _KEY.match(body)
    assert match is not None  # found by the same pattern
    head = f"{match['indent']}{match['key']}:{match['gap'] or ' '}{value}"
    tail = match["tail"] or ""
    if tail:
        column = match.start("tail") + len(tail) - len(tail.lstrip())
        comment = tail.lstrip()
        head = head.ljust(column) if len(head) < column else head + " "
        return head + comment + newline
    return head + newline


def _reads_back(text: str, variable: str) -> bool:
    """The edited text read as klaw reads engine.yaml names PostgreSQL and `variable`, and is valid."""
    import yaml

    from klaw.config_loader import ConfigError, config_from_mapping
    from klaw.yaml_syntax import safe_load

    try:
        raw = safe_load(text)
        config = config_from_mapping(raw if isinstance(raw, Mapping) else {}, "engine.yaml")
    except (ConfigError, yaml.YAMLError):  # not valid before either: left as it is, the line named
        return False
    return config.database.backend == "postgres" and config.database.url_env == variable
