"""Which package offered each plugin tool group klaw loaded on this home, kept in KLAW_HOME/plugins_seen.json:
once `pip uninstall` removed a plugin's dist-info nothing else knows its distribution's name, and the failed
row of its group said only "install the package that provides weather" (lefts55, decision 510). Written when
a group's entry point is found and what it says changed (not at every start), read when none is found. A
record klaw cannot write (a read-only home) or read (hand-edited, damaged) is passed over: it only words a
fix, and the failed row without it is what it was before."""

from __future__ import annotations

import json
import logging
import shlex
import sys
from dataclasses import asdict, dataclass
from importlib.metadata import Distribution, EntryPoint
from pathlib import Path
from urllib.request import url2pathname

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
    origin: str = ""  # pip's words for where it came from ("-e /src/klaw-mytools"), "" for an index (decision 540)

    def install_command(self) -> str:
        """The command installing it again into klaw's own environment, whatever `pip` is first on PATH: from
        where it came (a folder, editable or not; a URL), else from the index by its name."""
        return f"{shlex.quote(sys.executable)} -m pip install {self.origin or shlex.quote(self.package)}"


def origin_of(dist: Distribution) -> str:
    """Where `dist` was installed from, as pip's arguments, from PEP 610's direct_url.json (as
    scripts/venv-plugins.py reads it): `-e PATH` for an editable folder, `PATH` for a folder, `NAME @ URL` for a
    URL or VCS; "" when it came from an index (no direct_url.json) or the file cannot be read. A local plugin's
    hint sent the person to PyPI, where klaw-mytools is not (newcomer24)."""
    try:
        found = json.loads(dist.read_text("direct_url.json") or "null")
    except (OSError, ValueError):
        return ""
    url = found.get("url") if isinstance(found, dict) else None
    if not isinstance(url, str) or not url:
        return ""
    directory = found.get("dir_info")
    if url.startswith("file://") and isinstance(directory, dict):
        path = shlex.quote(url2pathname(url.removeprefix("file://")))
        return f"-e {path}" if directory.get("editable") is True else path
    vcs = found.get("vcs_info")
    if isinstance(vcs, dict) and isinstance(vcs.get("vcs"), str):
        commit = vcs.get("commit_id")
        url = f"{vcs['vcs']}+{url}" + (f"@{commit}" if isinstance(commit, str) and commit else "")
    return shlex.quote(f"{dist.metadata['Name']} @ {url}")


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
            origin = entry.get("origin")
            package, version, target = texts
            found[str(group)] = SeenPackage(package, version, target, origin if isinstance(origin, str) else "")
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
            now[group] = SeenPackage(point.dist.name, point.dist.version or "?", point.value, origin_of(point.dist))
    if now == known:
        return
    payload = {group: asdict(entry) for group, entry in sorted(now.items())}
    try:
        replace_file(path, (json.dumps(payload, indent=1) + "\n").encode())
    except OSError as exc:
        log.info("%s is not written (%s): an uninstalled plugin's package will not be named from it", path, exc)
