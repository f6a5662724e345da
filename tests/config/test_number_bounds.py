"""Every number in the config is finite and within reason: `summarizer.batchWaitSeconds: .inf` and
`scheduler.misfireGraceSeconds: 1000000000000000000` passed `klaw config check` and crashed `klaw chat`
with an OverflowError traceback. One rule on every section (config/base.py `bounded_number`), so a
field added later is bounded too: the walk below tries `.inf` and 10**18 in every number field."""

from __future__ import annotations

import typing
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from klaw.config import EngineConfig
from klaw.config.base import Section
from tests.cli.inited_home import init_home
from tests.cli.klaw_here import klaw_here
from tests.cli.test_cli import klaw


def sections(model: type[BaseModel], seen: set[type[BaseModel]] | None = None) -> Iterator[type[Section]]:
    """`model` and every section reachable from its fields (through dicts, lists, unions)."""
    seen = set() if seen is None else seen
    if model in seen:
        return
    seen.add(model)
    if issubclass(model, Section):
        yield model
    for field in model.model_fields.values():
        for kind in _types(field.annotation):
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                yield from sections(kind, seen)


def _types(annotation: object) -> Iterator[object]:
    yield annotation
    for argument in typing.get_args(annotation):
        yield from _types(argument)


def number_fields(section: type[Section]) -> Iterator[tuple[str, type]]:
    """Each field holding one number (`int`, `float`, or either or None); a list of ids is no duration."""
    for field in section.model_fields.values():
        annotation = field.annotation
        kinds = set(typing.get_args(annotation)) - {type(None)} if typing.get_origin(annotation) else {annotation}
        if kinds and kinds <= {int, float} and field.alias:
            yield field.alias, float if float in kinds else int


CASES = [(section, alias, kind) for section in sections(EngineConfig) for alias, kind in number_fields(section)]


def test_the_walk_finds_the_fields_that_crashed() -> None:
    found = {(section.__name__, alias) for section, alias, _ in CASES}
    assert ("SummarizerConfig", "batchWaitSeconds") in found and ("SchedulerConfig", "misfireGraceSeconds") in found
    assert len(CASES) > 60


@pytest.mark.parametrize(("section", "alias", "kind"), CASES, ids=[f"{s.__name__}.{a}" for s, a, _ in CASES])
def test_every_number_field_refuses_infinity_and_absurd_values(section: type[Section], alias: str, kind: type) -> None:
    floats = [float("inf"), float("-inf"), float("nan"), 1e18]
    bad: list[object] = [10**18, -(10**18), *(floats if kind is float else [])]
    for value in bad:
        with pytest.raises(ValidationError) as caught:
            section.model_validate({alias: value})
        mine = [e for e in caught.value.errors() if e["loc"] == (alias,)]
        assert mine, (alias, value, caught.value)
        assert (
            "must be a finite number" in mine[0]["msg"]
            or "must be at most" in mine[0]["msg"]
            or "too small a context budget" in mine[0]["msg"]  # a budget's own floor (decision 487)
            or (mine[0]["type"] in ("greater_than", "greater_than_equal", "less_than_equal", "less_than"))
        ), mine


def test_klaw_config_check_names_each_field_and_chat_says_so_without_a_traceback(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    config = home / "engine.yaml"
    config.write_text(
        "summarizer:\n  batchWaitSeconds: .inf\nscheduler:\n  misfireGraceSeconds: 1000000000000000000\n",
        encoding="utf-8",
    )
    check = klaw_here(home, "config", "check")
    assert check.returncode == 2, check.stdout + check.stderr
    said = check.stdout + check.stderr
    assert "summarizer.batchWaitSeconds = inf: " in said and "must be a finite number" in said, said
    assert "scheduler.misfireGraceSeconds = 1000000000000000000: " in said, said
    assert "must be at most 31536000 (a year, in seconds)" in said, said
    chat = klaw(home, "chat", stdin="hi\n")
    assert chat.returncode != 0 and "Traceback" not in chat.stderr, chat.stderr
    assert "summarizer.batchWaitSeconds" in chat.stderr, chat.stderr


def test_the_defaults_are_within_the_bounds() -> None:
    assert isinstance(EngineConfig(), EngineConfig)
