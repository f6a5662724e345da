"""Three small things newcomer23 read as typed (decision 527 item 5): `klaw sandbox install` with no package
printed click's "Usage: … {packages}..." (odd braces); /status said an MCP server's retry was "retry in 0 s
(failure 1)" (tests/tools/mcp_client/test_mcp_tools_in_turns.py holds that one); `klaw config show` and
the web page's Settings (the same rows, config_view.py) said `models.stand-in/echo.contextBudget null
default` where /models says 8000."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.klaw_here import klaw_here


def test_sandbox_install_without_a_package_says_what_to_type(tmp_path: Path) -> None:
    said = klaw_here(tmp_path, "sandbox", "install")
    assert said.returncode == 2 and said.stdout == ""
    err = " ".join(said.stderr.split())
    assert "error: name the packages to install, as pip takes them: klaw sandbox install PACKAGE..." in err, err
    assert "{packages}" not in err and "Traceback" not in err
    assert "[PACKAGE]..." in " ".join(klaw_here(tmp_path, "sandbox", "install", "--help").stdout.split())


def test_a_model_without_a_context_budget_shows_the_one_in_force(tmp_path: Path) -> None:
    (tmp_path / "engine.yaml").write_text(
        "models:\n  stand-in/echo:\n    baseUrl: http://127.0.0.1:9/v1\nrouting:\n  default: stand-in/echo\n",
        encoding="utf-8",
    )
    show = klaw_here(tmp_path, "config", "show", "--json")
    assert show.returncode == 0, show.stderr
    row = json.loads(show.stdout)["models.stand-in/echo.contextBudget"]
    assert row == {"value": 8000, "source": "default (context.defaultBudgetTokens)"}, row
    (tmp_path / "engine.yaml").write_text(
        "models:\n  stand-in/echo:\n    baseUrl: http://127.0.0.1:9/v1\nrouting:\n  default: stand-in/echo\n"
        "context:\n  defaultBudgetTokens: 6000\n",
        encoding="utf-8",
    )
    row = json.loads(klaw_here(tmp_path, "config", "show", "--json").stdout)["models.stand-in/echo.contextBudget"]
    assert row["value"] == 6000, row
