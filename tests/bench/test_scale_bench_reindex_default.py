"""`klaw bench scale --size N` without `--reindex-size`: the reindex part is no larger than the search part
(a newcomer's `--size 2000` spent 7.7 of its 10 minutes reindexing the default 5000 messages), and it
says what it is doing before it starts."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from klaw.cli.app import app
from klaw.home import KlawHome
from klaw.home_init import initialise_home


def test_the_reindex_part_defaults_to_the_size_asked_for(tmp_path: Path) -> None:
    home = KlawHome(tmp_path / "home")
    initialise_home(home)
    home.config_file.write_text("embedder:\n  backend: fake\n  dim: 32\n")
    args = ["bench", "scale", "--size", "200", "--queries", "2", "--past-segments", "1"]

    result = CliRunner().invoke(app, args, env={"KLAW_HOME": str(home.root), "COLUMNS": "200"})

    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "klaw reindex throughput: a throwaway SQLite home of 200 messages (--reindex-size; 0 skips it)" in text
    assert "klaw reindex of 200 messages" in text and "klaw reindex of 5000" not in text
