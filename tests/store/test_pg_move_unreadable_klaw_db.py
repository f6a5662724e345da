"""`klaw db migrate --to postgres` carries what klaw.db holds beside the log (runtime settings, replies still
waiting, the hour's sends); a klaw.db it cannot read is refused in words naming what, why and what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from klaw.store.postgres.rebuild import _read_sqlite
from klaw.store.protocol import StorageError


def test_a_klaw_db_that_is_no_database_is_named_with_what_to_do(tmp_path: Path) -> None:
    klaw_db = tmp_path / "klaw.db"
    klaw_db.write_bytes(b"not a database, " * 512)
    with pytest.raises(StorageError) as refused:
        _read_sqlite(klaw_db)
    said = str(refused.value)
    assert f"cannot read what {klaw_db} holds beside the log" in said
    assert "runtime settings, replies still waiting, the hour's sends" in said
    assert "`klaw db info` says what is wrong with it" in said
    assert "run the move again" in said
