"""Skills called by name, as newcomer24 found them (item 23, decision 540): a `$5` in a body (a price) is emptied
when the skill is called by name (documented) but `klaw skills check` said nothing; and a piped `/help` listed
`/greet` without its description. A real home, `klaw skills check` in process, a piped `klaw chat` (no engine
starts for /help)."""

from __future__ import annotations

from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import chat_env, init_home
from tests.cli.klaw_here import klaw_here
from tests.cli.piped_chat import piped

GREET = """---
name: greet
description: Greet someone warmly by name.
---
Greet $1 warmly. Mention that the coffee costs $5 today.
"""
ORDERED = """---
name: weather-report
description: Write a short weather report for a city.
---
Report the weather for $1 in $2 units.
"""
KEPT = """---
name: price-list
description: The prices.
user-invocable: false
---
Coffee is $5.
"""


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    init_home(home)
    for name, text in (("greet", GREET), ("weather-report", ORDERED), ("price-list", KEPT)):
        (home / "workspace" / "skills" / name).mkdir(parents=True)
        (home / "workspace" / "skills" / name / "SKILL.md").write_text(text, encoding="utf-8")
    return home


def test_skills_check_warns_of_a_dollar_amount_a_call_by_name_would_empty(tmp_path: Path) -> None:
    checked = klaw_here(_home(tmp_path), "skills", "check", env={"COLUMNS": "400"})
    said = " ".join((checked.stdout + checked.stderr).split())
    assert checked.returncode == 0, said  # a warning: the skill loads
    assert (
        "warning: greet/SKILL.md: $5 is filled with the fifth word after /name when the skill is called by name,"
        " and emptied when fewer words are given, but no $2 comes before it: if it is a dollar amount, write 5"
        " dollars"
    ) in said, said
    assert "weather-report/SKILL.md" not in said and "price-list/SKILL.md" not in said  # in order; never filled


async def test_a_piped_help_lists_each_skill_with_its_description(tmp_path: Path) -> None:
    home = _home(tmp_path)
    async with FakeOpenAiServer() as model:
        code, out, err = await piped(chat_env(home, model.base_url), "/help")
    assert code == 0, err
    assert "/greet — Greet someone warmly by name." in out, out  # before: "/greet" alone
    assert "/weather-report — Write a short weather report for a city." in out
    assert "price-list" not in out
    assert not model.chat_requests
