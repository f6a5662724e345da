"""adversary28: `contextBudget: 1` passed `klaw config check`; each turn then logged "over the 0-token
budget" and sent ~2,183 tokens anyway. A budget under 256 tokens is refused at load, in words naming the
field, the value and the least taken (decision 487), for a model's contextBudget and the default alike."""

from __future__ import annotations

from pathlib import Path

from tests.cli.klaw_here import klaw_here
from tests.cli.test_config_check_routing import _home

MODEL = "models:\n  stand-in/echo:\n    baseUrl: http://127.0.0.1:8999/v1\n    contextBudget: {budget}\n"
ROUTING = "routing:\n  default: stand-in/echo\n"


def test_a_context_budget_of_one_token_is_refused_in_words(tmp_path: Path) -> None:
    result = klaw_here(_home(tmp_path, MODEL.format(budget=1) + ROUTING), "config", "check")
    said = " ".join(result.stderr.split())
    assert result.returncode == 2, said
    assert "models.stand-in/echo.contextBudget = 1: 1 tokens is too small a context budget" in said, said
    assert "at least 256" in said and "Value error" not in said and "Traceback" not in said


def test_a_default_budget_under_the_floor_is_refused_and_a_workable_one_passes(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    low = _home(tmp_path / "a", MODEL.format(budget=4096) + ROUTING + "context:\n  defaultBudgetTokens: 0\n")
    said = " ".join(klaw_here(low, "config", "check").stderr.split())
    assert "context.defaultBudgetTokens = 0: 0 tokens is too small a context budget" in said, said
    (tmp_path / "b").mkdir()
    fine = klaw_here(_home(tmp_path / "b", MODEL.format(budget=4096) + ROUTING), "config", "check")
    assert "too small a context budget" not in fine.stderr + fine.stdout


# Decision 500: a budget over the floor but under what klaw's system prompt and the model's tools take passed
# `config check`; every turn then had no room for a message. Computed from the home's prompt files and tools.
ROOMY_TOOLS = "tools:\n  enabled: [clock, files, memory, web]\n"


def test_a_budget_the_prompt_and_tools_fill_is_refused_with_the_figures_and_the_least_that_works(
    tmp_path: Path,
) -> None:
    home = _home(tmp_path, MODEL.format(budget=900) + ROUTING + ROOMY_TOOLS)
    result = klaw_here(home, "config", "check")
    said = " ".join(result.stderr.split())
    assert result.returncode == 2, said
    assert "models.stand-in/echo.contextBudget = 900 leaves no room for a message on stand-in/echo" in said, said
    assert "its context is built in 810 tokens (90 %), and the system prompt takes" in said, said
    assert "tools' definitions" in said and "where a turn needs 256" in said, said
    least = int(said.split("contextBudget to at least ")[1].split(",")[0])
    assert least > 900 and least % 100 == 0, said
    assert "or offer stand-in/echo fewer tools (tools.enabled, or models.stand-in/echo.tools)" in said, said
    assert "Traceback" not in said

    # the least it names passes; fewer tools pass too
    (home / "engine.yaml").write_text(MODEL.format(budget=least) + ROUTING + ROOMY_TOOLS, encoding="utf-8")
    fixed = klaw_here(home, "config", "check")
    assert fixed.returncode == 0, fixed.stderr
    (home / "engine.yaml").write_text(MODEL.format(budget=900) + ROUTING + "tools:\n  enabled: []\n")
    assert klaw_here(home, "config", "check").returncode == 0


def test_a_model_routed_to_summaries_alone_is_not_held_to_a_chats_room(tmp_path: Path) -> None:
    small = "  stand-in/summaries:\n    baseUrl: http://127.0.0.1:8999/v1\n    contextBudget: 300\n"
    yaml = (
        MODEL.format(budget=32768) + small + ROUTING + "  tasks:\n    summarization: stand-in/summaries\n" + ROOMY_TOOLS
    )
    result = klaw_here(_home(tmp_path, yaml), "config", "check")
    assert result.returncode == 0, result.stderr
