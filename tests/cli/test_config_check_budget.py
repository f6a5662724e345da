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
