"""`klaw bench embed` compares the local runtimes side by side in one run, through typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from klaw.cli.app import app
from klaw.home import KlawHome
from klaw.home_init import initialise_home


def test_numpy_and_onnx_are_measured_in_one_run(tmp_path: Path) -> None:
    home = KlawHome(tmp_path / "home")
    initialise_home(home)
    out = tmp_path / "embed.json"
    args = ["bench", "embed", "--texts", "4", "--runtime", "numpy", "--runtime", "onnx-fp32", "--out", str(out)]
    result = CliRunner().invoke(app, args, env={"KLAW_HOME": str(home.root), "COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "numpy" in result.output and "onnx-fp32" in result.output and "texts/s" in result.output
    runs = json.loads(out.read_text("utf-8"))["runs"]
    assert [r["runtime"] for r in runs] == ["numpy", "onnx-fp32"]
    assert all(r["model_id"] == "sentence-transformers/all-MiniLM-L6-v2" for r in runs)
    assert [p.suffix for p in home.embedder_cache.iterdir()] == [".onnx"]  # built in the home, kept


def test_an_unknown_runtime_is_named_without_a_traceback(tmp_path: Path) -> None:
    home = KlawHome(tmp_path / "home")
    initialise_home(home)
    result = CliRunner().invoke(app, ["bench", "embed", "--runtime", "onnx"], env={"KLAW_HOME": str(home.root)})
    assert result.exit_code != 0
    assert "unknown --runtime onnx" in result.output and "onnx-fp32" in result.output
    assert "Traceback" not in result.output
