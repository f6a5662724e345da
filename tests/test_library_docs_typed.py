"""docs/library.md's Python blocks pass `mypy --strict`: each is a file in tests/library_docs/, which the
project's own mypy and ruff check, and this test keeps them equal to the page. Before, the page's model
functions took `messages: list[ChatMessage]` where `FunctionModel` passes a tuple (`Sequence`), and a
plugin's `provide(setup) -> list` had no item type: a program copied from it failed `mypy --strict`, and
`messages.append` failed the turn (newcomer17; decision 455). Running mypy here would cost ~20 s of CPU
on a cold cache; the lint step checks the files already."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COPIES = REPO / "tests" / "library_docs"


def test_each_python_block_of_the_library_page_is_a_checked_file() -> None:
    text = (REPO / "docs" / "library.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```(?:python|py)\n(.*?)```", text, flags=re.S)
    copies = sorted(COPIES.glob("block_*.py"), key=lambda path: int(path.stem.removeprefix("block_")))
    assert len(copies) == len(blocks), "one tests/library_docs/block_N.py per ```python/```py block of the page"
    for number, (block, copy) in enumerate(zip(blocks, copies, strict=True)):
        assert copy.name == f"block_{number}.py"
        assert copy.read_text(encoding="utf-8") == block, (
            f"docs/library.md's block {number} differs from {copy.relative_to(REPO)}: copy the block there"
            " (mypy --strict and ruff check that file)"
        )
