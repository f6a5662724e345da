"""`klaw backup` of a home `klaw serve` runs on, restored into a new home (newcomer22, decision 512).

The documented `tar czf … -C ~ .klaw` made an archive others could read (0644 under the usual umask) of every
conversation and service.env, packed the embedder's cache (87 MB of 85 MB compressed) and warned on the
socket. Here the archive is 0600 under umask 022, holds no cache, socket or SQLite -wal, and a log line
being written at that moment (a torn last line) is not in it; restored into a new home, `klaw log check`
and `klaw db info` pass and memory search finds the messages.
"""

from __future__ import annotations

import asyncio
import os
import stat
import tarfile
from pathlib import Path

import yaml

from klaw.home import KlawHome
from klaw.home_backup import back_up
from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.klaw_here import klaw_here
from tests.cli.test_reindex_cmd import a_home
from tests.serve_helpers import running, serve_config, serve_env, stop, web_page, write_serve_home


def test_a_backup_of_a_serving_home_restores_into_a_working_home(tmp_path: Path) -> None:
    home = a_home(tmp_path)  # six messages in the log
    (home / "cache" / "embedder").mkdir(parents=True)
    (home / "cache" / "embedder" / "model.onnx").write_bytes(b"\0" * 4096)
    (day,) = (home / "conversations").glob("*/*.jsonl")
    archive = tmp_path / "backups" / "home.tgz"
    archive.parent.mkdir()
    by_library = tmp_path / "backups" / "library.tgz"
    outputs = []

    async def backed_up_while_serving() -> None:
        async with FakeOpenAiServer() as model:
            write_serve_home(home, serve_config(model.base_url))
            assert klaw_here(home, "reindex").returncode == 0  # klaw.db holds them
            assert (home / "klaw.db.floats").exists()  # their vectors' float rows (decision 534): left out
            async with running(env=serve_env(home)) as serve:
                await web_page(serve)  # the engine holds klaw.db open (WAL), its socket is there
                assert (home / "engine.sock").exists() and (home / "klaw.db-wal").exists()
                with open(day, "ab") as log:
                    log.write(b'{"id": "being-writ')  # a line being appended at this very moment
                outputs.append(await asyncio.to_thread(klaw_here, home, "backup", str(archive)))
                umask = os.umask(0o022)  # a library user's process: the archive is private all the same
                try:
                    await asyncio.to_thread(back_up, KlawHome(home), by_library, database=home / "klaw.db")
                finally:
                    os.umask(umask)
                assert await stop(serve) == 0

    asyncio.run(backed_up_while_serving())

    done = outputs[0]
    assert done.returncode == 0, done.stderr
    assert f"Wrote {archive}" in done.stdout and "cache/ (rebuilt on first use)" in done.stdout
    assert f"klaw restore {archive}" in done.stdout and "klaw chat" in done.stdout  # how to restore, what to stop
    for written in (archive, by_library):
        assert stat.S_IMODE(written.stat().st_mode) == 0o600
        with tarfile.open(written) as packed:
            names = packed.getnames()
        assert "klaw.db" in names and "scheduler.db" in names and "engine.yaml" in names
        assert not [name for name in names if name.startswith("cache") or name.endswith(("-wal", "-shm"))]
        assert "engine.sock" not in names and "engine.lock" not in names
        assert not [name for name in names if ".floats" in name]  # made again from klaw.db (decision 534)
    assert not list(archive.parent.glob(".*"))  # no scratch or partial file left beside them

    restored = tmp_path / "restored"
    restored.mkdir(mode=0o700)
    with tarfile.open(archive) as packed:
        if hasattr(tarfile, "data_filter"):
            packed.extractall(restored, filter="data")
        else:  # Python 3.11.0-3.11.3 (Debian 12's 3.11.2) has no filters; this is the archive klaw just wrote
            packed.extractall(restored)
    assert not (restored / "conversations" / day.parent.name / day.name).read_bytes().endswith(b"being-writ")
    checked = klaw_here(restored, "log", "check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    info = klaw_here(restored, "db", "info")
    assert info.returncode == 0, info.stderr
    messages = next(line for line in info.stdout.splitlines() if "messages" in line)
    assert messages.split()[-2] == "6", info.stdout
    found = klaw_here(restored, "memory", "search", "--chat", "console:me", "lighthouse")
    assert found.returncode == 0 and "lighthouse" in found.stdout, found.stderr
    assert "Traceback" not in checked.stderr + info.stderr + found.stderr + done.stderr


def test_a_postgres_home_is_told_to_dump_its_database_and_an_archive_is_never_replaced(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert klaw_here(home, "init").returncode == 0
    config = yaml.safe_load((home / "engine.yaml").read_text())
    config["database"] = {"backend": "postgres", "urlEnv": "MY_KLAW_DSN"}
    (home / "engine.yaml").write_text(yaml.safe_dump(config))
    target = tmp_path / "out"
    target.mkdir()
    done = klaw_here(home, "backup", str(target))
    assert done.returncode == 0, done.stderr
    (written,) = target.glob("klaw-*.tgz")
    assert "pg_dump" in done.stderr and '"$MY_KLAW_DSN"' in done.stderr
    again = klaw_here(home, "backup", str(written))
    assert again.returncode == 2 and "exists already" in again.stderr and "Traceback" not in again.stderr
    inside = klaw_here(home, "backup", str(home))
    assert inside.returncode == 2 and "is inside the home" in inside.stderr and not list(home.glob("*.tgz"))
    # A missing folder inside the home is refused before it is made (decision 528: it was made, then refused)
    inside = klaw_here(home, "backup", f"{home}/backups/")
    assert inside.returncode == 2 and "is inside the home" in inside.stderr, inside.stderr
    assert not (home / "backups").exists()


def test_a_file_gone_during_the_backup_is_passed_over(tmp_path: Path) -> None:
    """review55 (decision 517): a file klaw removes while the backup runs (a rewrite's temporary file, a
    forgotten chat's day) failed the whole backup as "cannot write" the archive; it is passed over now."""
    home = a_home(tmp_path)
    (day,) = (home / "conversations").glob("*/*.jsonl")
    going = home / "conversations" / "zz_gone" / "2026-01-01.jsonl"
    going.parent.mkdir(mode=0o700)
    going.write_text('{"a": 1}\n', encoding="utf-8")
    target = tmp_path / "home.tgz"

    def progress(done: int, total: int) -> None:  # after the first file archived, before the others
        going.unlink(missing_ok=True)

    report = back_up(KlawHome(home), target, database=home / "klaw.db", progress=progress)
    with tarfile.open(target) as archive:
        names = archive.getnames()
    assert day.relative_to(home).as_posix() in names and "conversations/zz_gone/2026-01-01.jsonl" not in names
    assert report.files == len(names)
