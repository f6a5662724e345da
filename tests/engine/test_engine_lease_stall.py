"""An engine stalled past its lease on a shared PostgreSQL database (decision 541, adversary33).

adversary33 stopped engine A (SIGSTOP) past `leaseSeconds`; engine B with the same embedder started (its
start drops expired rows, A's among them) and stopped; A went on, but its renewal was an UPDATE of a row no
longer there, so engine C with another embedder started beside the running A and re-bound the vector
tables. Now A's renewal restores its row (C is refused), and an A that comes back to a database another
embedder took meanwhile stores no more vectors, saying so."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import psycopg
import pytest

import tests.engine.test_several_engines as several
from klaw.llm.fake_server import FakeOpenAiServer
from tests.conftest import new_database
from tests.engine.test_engines_embedder_conflict import _bindings, _config
from tests.pg_server import PgServer


def _engine_rows(dsn: str) -> list[tuple[str, int, bool]]:
    with psycopg.connect(dsn) as connection:
        rows = connection.execute(
            "SELECT embedder_id, dim, expires_at > clock_timestamp() FROM engine_leases ORDER BY holder"
        ).fetchall()
    return [(str(model), int(dim), bool(live)) for model, dim, live in rows]


def _said(root: Path) -> str:
    """Everything the engine wrote: its stderr and its log files."""
    texts = [(root / "engine.err").read_text(errors="replace")]
    texts += [path.read_text(errors="replace") for path in sorted((root / "logs").glob("*.log*"))]
    return "\n".join(texts)


async def test_a_stalled_engine_restores_its_record(
    tmp_path: Path, postgres_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn = postgres_server.dsn(new_database(postgres_server))
    async with FakeOpenAiServer() as server:
        monkeypatch.setattr(several, "_write_config", _config(384))
        async with several._engine(tmp_path / "a", server.base_url, dsn) as a:
            bound = _bindings(dsn)
            a.process.send_signal(signal.SIGSTOP)
            try:
                await asyncio.sleep(4)  # past leaseSeconds 3: A's row expired
                async with several._engine(tmp_path / "b", server.base_url, dsn):  # same embedder: drops A's row
                    pass
            finally:
                a.process.send_signal(signal.SIGCONT)
            await asyncio.sleep(3)  # A renews (every second) and finds its row gone
            assert _engine_rows(dsn) == [("fake-hash-384", 384, True)]
            assert await a.send("a1", "c1")
            monkeypatch.setattr(several, "_write_config", _config(32))
            with pytest.raises(AssertionError):  # C exits instead of listening
                async with several._engine(tmp_path / "c", server.base_url, dsn):
                    pass
            said = (tmp_path / "c" / "engine.err").read_text()
            assert "another engine" in said and "'fake-hash-384' (dim 384)" in said, said[-1500:]
            assert _bindings(dsn) == bound
            assert "its record on the shared database had been dropped: restored" in _said(tmp_path / "a")


async def test_an_engine_back_from_a_stall_to_another_embedder_stores_no_vectors(
    tmp_path: Path, postgres_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn = postgres_server.dsn(new_database(postgres_server))
    async with FakeOpenAiServer() as server:
        monkeypatch.setattr(several, "_write_config", _config(384))
        async with several._engine(tmp_path / "a", server.base_url, dsn) as a:
            a.process.send_signal(signal.SIGSTOP)
            try:
                await asyncio.sleep(4)
                monkeypatch.setattr(several, "_write_config", _config(32))
                async with several._engine(tmp_path / "c", server.base_url, dsn) as c:  # empty tables: re-bound
                    assert ("message_vectors", "fake-hash-32", 32) in _bindings(dsn)
                    a.process.send_signal(signal.SIGCONT)
                    await asyncio.sleep(3)  # A renews and finds C's embedder on the database
                    said = _said(tmp_path / "a")
                    assert "this engine stalled past its lease" in said, said[-2000:]
                    assert "'fake-hash-32' (dim 32), where this engine embeds with 'fake-hash-384'" in said
                    assert "stores no more vectors" in said and "Traceback" not in said, said[-2000:]
                    assert _engine_rows(dsn) == [("fake-hash-32", 32, True)]  # A's row not restored beside C's
                    assert await a.send("a1", "c1")  # A still answers
                    assert await c.send("c1", "c2")
                    await asyncio.sleep(3)  # time for A's queue to have embedded, had it gone on
                    with psycopg.connect(dsn) as connection:
                        dims = connection.execute(
                            "SELECT DISTINCT vector_dims(embedding) FROM message_vectors"
                        ).fetchall()
                    assert (384,) not in dims
            finally:
                a.process.send_signal(signal.SIGCONT)
