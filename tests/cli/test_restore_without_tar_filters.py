"""`klaw restore` on a Python without tarfile's extraction filters (decision 537): Debian 12's own python3 is
3.11.2, the filters arrived in 3.11.4, and every restore there failed with `TypeError: TarFile.extractall() got an
unexpected keyword argument 'filter'`. restore_extract.py then makes the `data` filter's look itself.

Each test runs both ways on a Python that has the filters (`HAS_FILTERS` set false for the second) and the one
way on one that has not (CI's, scripts/test.sh on Debian 12): a real home backed up and restored, private,
owned by whoever restores, its times and its link within the home kept; a chain of links that resolves out
of the home, which no check on the names alone sees, refused in tarfile's words (it was called "cut short or
damaged" before), nothing written.
"""

from __future__ import annotations

import io
import json
import os
import stat
import sys
import tarfile
from pathlib import Path

import pytest

from klaw import restore_extract
from tests.cli.klaw_here import klaw_here
from tests.cli.test_reindex_cmd import a_home


@pytest.fixture(params=["tarfile's filter", "klaw's own check"])
def filters(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "tarfile's filter" and not restore_extract.HAS_FILTERS:
        pytest.skip(f"this Python's tarfile has no extraction filters (3.11.4+): {sys.version.split()[0]}")
    if request.param == "klaw's own check":
        monkeypatch.setattr(restore_extract, "HAS_FILTERS", False)
    return str(request.param)


def test_a_home_with_a_link_restores_private_and_whole(tmp_path: Path, filters: str) -> None:
    home = a_home(tmp_path)
    skill = home / "workspace" / "skills" / "tides" / "SKILL.md"
    skill.parent.mkdir(parents=True, mode=0o700)
    skill.write_text("---\nname: tides\ndescription: Tides.\n---\nLook it up.\n", encoding="utf-8")
    (home / "workspace" / "tides").symlink_to("skills/tides")  # a link: each member's real path is checked
    script = home / "workspace" / "run.sh"
    script.write_text("echo hi\n")
    script.chmod(0o755)
    os.utime(skill, (1_700_000_000, 1_700_000_000))
    assert klaw_here(home, "reindex").returncode == 0
    archive = tmp_path / "home.tgz"
    assert klaw_here(home, "backup", str(archive)).returncode == 0

    restored = tmp_path / "restored"
    said = klaw_here(tmp_path / "unused", "restore", str(archive), "--home", str(restored))
    out = " ".join(said.stdout.split())
    assert said.returncode == 0, said.stdout + said.stderr
    assert "klaw.db opens: 6 messages in 1 chats" in out and "1 skills" in out, out
    assert (restored / "workspace" / "tides" / "SKILL.md").read_text().endswith("Look it up.\n")
    assert (restored / "workspace" / "tides").readlink() == Path("skills/tides")
    assert (restored / "workspace" / "skills" / "tides" / "SKILL.md").stat().st_mtime == 1_700_000_000
    for path in [restored, *restored.rglob("*")]:
        if path.is_symlink():
            continue
        facts = path.stat()
        assert (facts.st_uid, facts.st_gid) == (os.getuid(), os.getgid()), path
        want = 0o700 if path.is_dir() or path == restored / "workspace" / "run.sh" else 0o600
        assert stat.S_IMODE(facts.st_mode) == want, (path, oct(facts.st_mode))
    checked = klaw_here(restored, "log", "check")
    assert checked.returncode == 0, checked.stdout + checked.stderr


def _chain(path: Path) -> Path:
    """`a/b` → `..` (the home itself) and `a/c` → `b/..`: each name stays in the home as text, but `a/c`
    resolves to the folder above it, once `a/b` is on the disk."""
    with tarfile.open(path, "w:gz") as packed:
        for name, data in (
            ("klaw-backup.json", json.dumps({"format": 1, "klaw": "0.1", "made": "x"}).encode()),
            ("engine.yaml", b"{}\n"),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            packed.addfile(info, io.BytesIO(data))
        folder = tarfile.TarInfo("a")
        folder.type = tarfile.DIRTYPE
        packed.addfile(folder)
        for name, to in (("a/b", ".."), ("a/c", "b/..")):
            link = tarfile.TarInfo(name)
            link.type, link.linkname = tarfile.SYMTYPE, to
            packed.addfile(link)
    return path


def test_a_chain_of_links_leading_out_is_refused_in_its_words(tmp_path: Path, filters: str) -> None:
    archive = _chain(tmp_path / "chain.tgz")
    place = tmp_path / "place"
    place.mkdir()
    said = klaw_here(tmp_path / "unused", "restore", str(archive), "--home", str(place / "home"))
    words = " ".join(said.stderr.split())
    assert said.returncode == 2, words
    assert f"'a/c' would link to '{place}', which is outside the destination" in words, words
    assert "nothing was written" in words and "damaged" not in words and "Traceback" not in words, words
    assert list(place.iterdir()) == []  # the hidden folder it was written into is gone
