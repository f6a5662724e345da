"""A command's start walked every file of the home to take others' bits off (2.3 s of a 4.8 s start at
3,000 chats): the whole home is now walked once, and again only when the home's folder was open to others
or the walk's number moved on; other starts look at the home's folder and its own entries (decision 486).
Counted through the audit hook (`os.scandir`, `os.listdir`), not timed."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any

from klaw.home import KlawHome
from tests.cli.klaw_here import klaw_here

_listed: list[str] | None = None  # the folders listed while a counted command runs


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _listed is not None and event in ("os.scandir", "os.listdir") and args and args[0] is not None:
        _listed.append(os.fsdecode(args[0]) if isinstance(args[0], str | bytes | Path) else str(args[0]))


sys.addaudithook(_audit)  # audit hooks stay for the process: this one counts only while `_listed` is a list


def a_home_with_chats(tmp_path: Path, chats: int) -> KlawHome:
    """A home `klaw init` made, with the log folders and files of `chats` chats, all private."""
    root = tmp_path / "home"
    assert klaw_here(root, "init").returncode == 0
    home = KlawHome(root)
    for n in range(chats):
        folder = home.conversations / f"library_customer-{n}"
        folder.mkdir(parents=True, mode=0o700)
        (folder / "2026-01-01.jsonl").write_bytes(b"")
        (folder / "2026-01-01.jsonl").chmod(0o600)
    return home


def folders_listed_by(home: KlawHome, *args: str) -> list[str]:
    global _listed
    _listed = []
    try:
        assert klaw_here(home.root, *args).returncode in (0, 1)
        return [path for path in _listed if path.startswith(str(home.conversations))]
    finally:
        _listed = None


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_a_command_walks_the_log_folders_once(tmp_path: Path) -> None:
    """`klaw init` walked the home it made; the chats' folders written since are not listed again."""
    home = a_home_with_chats(tmp_path, 30)
    assert folders_listed_by(home, "config", "check") == []  # was 31: conversations/ and each chat's folder
    home.privacy_walk_file.unlink()  # a home from before decision 486
    assert len(folders_listed_by(home, "config", "check")) == 31  # walked once
    assert folders_listed_by(home, "config", "check") == []


def test_an_edited_engine_yaml_is_still_made_private_at_every_start(tmp_path: Path) -> None:
    """An editor that writes a new file under umask 022 leaves engine.yaml 0644: a home's own entries are
    looked at on every start."""
    home = a_home_with_chats(tmp_path, 2)
    folders_listed_by(home, "config", "check")
    home.config_file.chmod(0o644)
    result = klaw_here(home.root, "config", "check")
    assert mode(home.config_file) == 0o600
    assert "other users could read 1 path(s)" in " ".join(result.stderr.split())


def test_a_home_folder_open_to_others_is_walked_again(tmp_path: Path) -> None:
    """While the home's folder is 0700 nobody else reaches a file beneath it; once it was open (chmod -R,
    a copy), anything beneath may be too: the whole home is walked again."""
    home = a_home_with_chats(tmp_path, 2)
    folders_listed_by(home, "config", "check")
    deep = home.conversations / "library_customer-1" / "2026-01-01.jsonl"
    for path in (home.root, home.conversations, deep):
        path.chmod(0o755 if path.is_dir() else 0o644)
    klaw_here(home.root, "config", "check")
    assert (mode(home.root), mode(home.conversations), mode(deep)) == (0o700, 0o700, 0o600)


def test_a_walk_of_an_older_number_or_a_marker_others_could_write_is_walked_again(tmp_path: Path) -> None:
    home = a_home_with_chats(tmp_path, 2)
    deep = home.conversations / "library_customer-0" / "2026-01-01.jsonl"
    for marker, marker_mode in ((b"klaw private walk 0\n", 0o600), (None, 0o666)):
        folders_listed_by(home, "config", "check")
        deep.chmod(0o644)
        if marker is not None:
            home.privacy_walk_file.write_bytes(marker)
        home.privacy_walk_file.chmod(marker_mode)
        klaw_here(home.root, "config", "check")
        assert mode(deep) == 0o600
        assert mode(home.privacy_walk_file) == 0o600


def test_a_fifo_in_the_markers_place_holds_no_start(tmp_path: Path) -> None:
    """A FIFO where the marker goes: read without waiting, not believed, replaced by the marker."""
    home = a_home_with_chats(tmp_path, 1)
    home.privacy_walk_file.unlink()
    os.mkfifo(home.privacy_walk_file, 0o600)
    assert klaw_here(home.root, "config", "check").returncode == 0
    assert stat.S_ISREG(home.privacy_walk_file.lstat().st_mode) and mode(home.privacy_walk_file) == 0o600
