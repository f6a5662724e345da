"""Which package offered each plugin tool group klaw loaded on this home, kept in KLAW_HOME/plugins_seen.json:
once `pip uninstall` removed a plugin's dist-info nothing else knows its distribution's name, and the failed
row of its group said only "install the package that provides weather" (lefts55, decision 510). Written when
a group's entry point is found and what it says changed (not at every start), read when none is found. A
record klaw cannot write (a read-only home) or read (hand-edited, damaged) is passed over: it only words a
fix, and the failed row without it is what it was before."""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import asdict, dataclass
from importlib.metadata import EntryPoint
from pathlib import Path

from klaw.atomic_file import replace_file
from klaw.small_file import read_small

log = logging.getLogger(__name__)
MAX_BYTES = 256 * 1024  # a home with a hundred plugins writes a few KB


@dataclass(frozen=True, slots=True)
class SeenPackage:
    """The distribution that offered a group (`package`, `version`) and its entry point's `target`."""

    package: str
    version: str
    target: str

    def install_command(self) -> str:
        """The command installing it again into klaw's own environment, whatever `pip` is first on PATH."""
        return f"{sys.executable} -m pip install {self.package}"


def seen(path: Path, group: str) -> SeenPackage | None:
    """What offered `group` when klaw last found it installed on this home; None when klaw never did."""
    return read_all(path).get(group)


def read_all(path: Path) -> dict[str, SeenPackage]:
    try:
        data = json.loads(read_small(path, MAX_BYTES))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.info("%s is passed over (%s): an uninstalled plugin's package is not named from it", path, exc)
        return {}
    found = {}
    for group, entry in data.items() if isinstance(data, dict) else ():
        fields = [entry.get(key) for key in ("package", "version", "target")] if isinstance(entry, dict) else []
        texts = [value for value in fields if isinstance(value, str) and value]
        if len(texts) == 3:
            found[str(group)] = SeenPackage(*texts)
    return found


def note(path: Path | None, points: dict[str, EntryPoint]) -> None:
    """Record the package of each group in `points` (the enabled plugin groups found installed), when a
    record differs from what the file holds; nothing when `path` is None (no home: a test's own groups)."""
    if path is None or not points:
        return
    known = read_all(path)
    now = dict(known)
    for group, point in points.items():
        if point.dist is not None and point.dist.name:
            now[group] = SeenPackage(point.dist.name, point.dist.version or "?", point.value)
    if now == known:
        return
    payload = {group: asdict(entry) for group, entry in sorted(now.items())}
    try:
        replace_file(path, (json.dumps(payload, indent=1) + "\n").encode())
    except OSError as exc:
        log.info("%s is not written (%s): an uninstalled plugin's package will not be named from it", path, exc)
