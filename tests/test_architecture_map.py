"""ARCHITECTURE.md stays exact: every module under src/klaw has its line, every line names one that exists.

The map is read the way a person reads it: a section "## `klaw/<package>/`" lists paths relative to
that package in the first column of its table; the "Top level" section lists `klaw/<module>.py`. A
first column may name several paths (`a.py` + `b/*.sql`); a path ending in `/` is a folder. Package
`__init__.py` files need no line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
MAP = REPO / "ARCHITECTURE.md"
SECTION = re.compile(r"^## `(klaw/[\w/]+/)`")
TICKED = re.compile(r"`([^`]+)`")


@dataclass
class ArchitectureMap:
    sections: dict[str, int] = field(default_factory=dict)  # "klaw/engine/" -> line number; "" = top level
    named: dict[str, int] = field(default_factory=dict)  # path under src/ -> line number


def _read_map() -> ArchitectureMap:
    result = ArchitectureMap()
    base: str | None = None
    for number, line in enumerate(MAP.read_text().splitlines(), 1):
        if line.startswith("## "):
            match = SECTION.match(line)
            base = match.group(1) if match else ("" if line.strip() == "## Top level" else None)
            if base is not None:
                result.sections[base] = number
            continue
        if base is None or not line.startswith("| `"):
            continue
        first_column = line.split("|")[1]
        for path in TICKED.findall(first_column):
            result.named[base + path] = number
    return result


def _exists(path: str) -> bool:
    if "*" in path:
        return any(SRC.glob(path))
    return (SRC / path).exists()


def _section_of(module: str) -> str:
    parts = module.split("/")
    return "" if len(parts) == 2 else f"{parts[0]}/{parts[1]}/"


def test_every_module_has_its_line() -> None:
    architecture = _read_map()
    covered = set()
    for named in architecture.named:
        pattern = named + "**/*.py" if named.endswith("/") else named
        covered |= {str(p.relative_to(SRC)) for p in SRC.glob(pattern)} if "*" in pattern else {named}
    missing = []
    for path in sorted(SRC.glob("klaw/**/*.py")):
        module = str(path.relative_to(SRC))
        if path.name == "__init__.py" or "__pycache__" in path.parts or module in covered:
            continue
        section = _section_of(module)
        if section in architecture.sections:
            relative = module if section == "" else module.removeprefix(section)
            heading = "## Top level" if section == "" else f"## `{section}`"
            missing.append(f"{module}: add the line   | `{relative}` | <what it owns> |   to the section {heading}")
        else:
            missing.append(f"{module}: add a section   ## `{section}` — <its job>   with a line for each module")
    assert not missing, "ARCHITECTURE.md has no line for these modules:\n" + "\n".join(missing)


def test_every_line_names_a_module_that_exists() -> None:
    architecture = _read_map()
    gone = [f"ARCHITECTURE.md:{line}: {path}" for path, line in architecture.named.items() if not _exists(path)]
    assert not gone, "ARCHITECTURE.md names paths that do not exist (moved or removed? fix the line):\n" + "\n".join(
        gone
    )
