"""Small modules with one job: every Python module under src/ and every file the web page ships
(channels/web/static/: its ES modules, HTML, CSS) is at most 400 lines (decision 458). A file past it is
split by job, the way app.js was split into modules that import only those below them."""

from __future__ import annotations

from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
STATIC = SRC / "klaw" / "channels" / "web" / "static"
MAX_LINES = 400


def _too_long(paths: list[Path]) -> list[str]:
    counted = ((path, len(path.read_text(encoding="utf-8").splitlines())) for path in paths)
    return [f"{path.relative_to(SRC)}: {lines} lines" for path, lines in counted if lines > MAX_LINES]


def test_every_static_file_of_the_web_page_is_at_most_400_lines() -> None:
    files = sorted(path for path in STATIC.rglob("*") if path.is_file())
    assert any(path.name == "app.js" for path in files)  # the folder read is the one the page is served from
    too_long = _too_long(files)
    assert not too_long, f"split these by job (at most {MAX_LINES} lines each):\n" + "\n".join(too_long)


def test_every_python_module_is_at_most_400_lines() -> None:
    too_long = _too_long(sorted(path for path in (SRC / "klaw").rglob("*.py") if "__pycache__" not in path.parts))
    assert not too_long, f"split these by job (at most {MAX_LINES} lines each):\n" + "\n".join(too_long)
