"""klaw creates files and folders only through `klaw/private_files.py` (decision 237): pathlib's
conveniences create with the umask's modes (`mkdir(parents=True)` makes its parents 0755, `write_text`
0644 under umask 022), which a program using klaw as a library keeps. The next writer added with one
of them fails here, naming the line; the end-to-end checks are tests/test_library_private_files.py.
"""

from __future__ import annotations

import re
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "src" / "klaw"
CREATING = re.compile(r"\.mkdir\(|\bmakedirs\(|\.write_text\(|\.write_bytes\(|\.touch\(")
# Where the umask's modes are right: temporary benchmark homes (inside a 0700 temporary folder) and the
# reports a person asked for at a path of their choosing; the kernel's cgroup files.
EXEMPT = ("bench/", "cli/bench_", "tools/sandbox/pids_cgroup.py", "private_files.py")


def test_files_and_folders_are_created_through_the_private_seam() -> None:
    found = []
    for path in sorted(SOURCE.rglob("*.py")):
        name = path.relative_to(SOURCE).as_posix()
        if name.startswith(EXEMPT):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if CREATING.search(line.split("#", 1)[0]):
                found.append(f"src/klaw/{name}:{number}: {line.strip()}")
    assert found == [], (
        "create through klaw/private_files.py (private_dirs, write_private, open_private, create_private),"
        " which makes folders 0700 and files 0600 whatever the umask:\n" + "\n".join(found)
    )
