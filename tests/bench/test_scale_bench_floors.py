"""`klaw bench scale` as a person reads it: beside the figures, the search and its parts drawn as bars on
one scale with the floors it cannot beat (the numpy scan, the memory bandwidth), so the distance shows."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from klaw.cli.app import app
from klaw.home import KlawHome
from klaw.home_init import initialise_home


def test_the_search_is_drawn_beside_its_floors(tmp_path: Path) -> None:
    home = KlawHome(tmp_path / "home")
    initialise_home(home)
    home.config_file.write_text("embedder:\n  backend: fake\n  dim: 32\n")
    args = ["bench", "scale", "--size", "300", "--queries", "3", "--past-segments", "2", "--reindex-size", "0"]

    result = CliRunner().invoke(app, args, env={"KLAW_HOME": str(home.root), "COLUMNS": "200"})

    assert result.exit_code == 0, result.output
    assert "300 messages on sqlite: a search against its floors (ms)" in result.output
    rows = {line.split("│")[1].strip(): line for line in result.output.splitlines() if line.count("│") > 3}
    for name in ("vector side", "full-text side", "neighbours", "memory-bandwidth floor of its scan"):
        assert name in rows, result.output
    assert "█" in rows["auto-RAG search (without query embedding)"]
    assert any(name.startswith("numpy KNN floor") for name in rows)
