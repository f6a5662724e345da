"""CoreMemory.update: validated, size-capped, atomic writes of core_memory.json."""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path

import pytest

from klaw.memory.core_memory import CoreMemory, CoreMemoryError


@pytest.fixture
def memory(tmp_path: Path) -> CoreMemory:
    return CoreMemory(tmp_path / "core_memory.json")


async def test_set_and_remove_keys_write_the_file_the_model_reads(memory: CoreMemory) -> None:
    assert await memory.update({"name": "Ada", "city": "Porto", "pets": ["cat"]}, max_chars=500) == {
        "name": "Ada",
        "city": "Porto",
        "pets": ["cat"],
    }
    assert await memory.update({"city": "Lisbon"}, ["pets"], max_chars=500) == {"name": "Ada", "city": "Lisbon"}
    assert json.loads(memory.path.read_text(encoding="utf-8")) == {"name": "Ada", "city": "Lisbon"}
    assert await memory.read() == {"name": "Ada", "city": "Lisbon"}
    assert stat.S_IMODE(memory.path.stat().st_mode) == 0o600  # personal facts: owner only
    assert [p.name for p in memory.path.parent.iterdir()] == ["core_memory.json"]  # no temporary file left


async def test_an_update_over_the_cap_is_refused_and_changes_nothing(memory: CoreMemory) -> None:
    await memory.update({"name": "Ada"}, max_chars=100)
    before = memory.path.read_bytes()
    with pytest.raises(CoreMemoryError, match=r"over its limit of 100 \(memory.coreMaxChars\)"):
        await memory.update({"biography": "x" * 200}, max_chars=100)
    assert memory.path.read_bytes() == before
    # the size counted is the indented JSON the model is shown
    rendered = CoreMemory.render({"name": "Ada", "b": "y" * 60})
    await memory.update({"b": "y" * 60}, max_chars=len(rendered))
    with pytest.raises(CoreMemoryError):
        await memory.update({"b": "y" * 61}, max_chars=len(rendered))


@pytest.mark.parametrize(
    ("values", "remove", "reason"),
    [
        ({"": "x"}, [], "non-empty"),
        ({" padded": "x"}, [], "leading or trailing"),
        ({"k" * 65: "x"}, [], "longer than 64"),
        ({"name": None}, [], "null"),
        ({"score": float("nan")}, [], "JSON cannot store"),
        ({"nested": {"deep": [1, {"x": float("inf")}]}}, [], "JSON cannot store"),
        ({"when": object()}, [], "not a JSON value"),
        ({}, ["missing"], "no key 'missing'"),
    ],
)
async def test_invalid_updates_are_refused_without_echoing_values(
    memory: CoreMemory, values: dict[str, object], remove: list[str], reason: str
) -> None:
    await memory.update({"name": "Ada"}, max_chars=500)
    before = memory.path.read_bytes()
    with pytest.raises(CoreMemoryError, match=reason) as raised:
        await memory.update(values, remove, max_chars=500)
    assert "Ada" not in str(raised.value)
    assert memory.path.read_bytes() == before


async def test_a_file_a_person_broke_is_not_overwritten(memory: CoreMemory) -> None:
    memory.path.write_text('{"name": "Ada",', encoding="utf-8")
    fix = "it is left as it is: ask the person to fix it by hand"
    with pytest.raises(CoreMemoryError, match=rf"core_memory.json cannot be read \(not valid JSON at line 1\); {fix}"):
        await memory.update({"city": "Porto"}, max_chars=500)
    assert memory.path.read_text(encoding="utf-8") == '{"name": "Ada",'
    memory.path.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(CoreMemoryError, match=rf"core_memory.json cannot be read \(not a JSON object\); {fix}"):
        await memory.update({"city": "Porto"}, max_chars=500)


async def test_an_existing_files_permissions_are_kept(memory: CoreMemory) -> None:
    memory.path.write_text("{}", encoding="utf-8")
    memory.path.chmod(0o640)
    await memory.update({"name": "Ada"}, max_chars=500)
    assert stat.S_IMODE(memory.path.stat().st_mode) == 0o640


async def test_concurrent_updates_are_serialised(memory: CoreMemory) -> None:
    await asyncio.gather(*(memory.update({f"fact{i}": i}, max_chars=5000) for i in range(20)))
    assert await memory.read() == {f"fact{i}": i for i in range(20)}
