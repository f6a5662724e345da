"""What a person wrote is printed literally by every command: square brackets are not rich markup.

`[/tmp]` read as a closing tag raised rich's MarkupError (a traceback instead of the answer);
`[urgent]` read as a style vanished. Real `klaw` subprocesses, as in test_cli.py.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.cli.klaw_here import klaw_here


def test_config_show_prints_values_with_brackets_literally(tmp_path: Path) -> None:
    # A model's display name is free text: rich must print its brackets, not read them as markup.
    (tmp_path / "engine.yaml").write_text(
        "models:\n  local/x:\n    baseUrl: http://127.0.0.1:1/v1\n    name: '[urgent] list [all] models in [/tmp]'\n"
        "routing:\n  default: local/x\n",
        encoding="utf-8",
    )
    result = klaw_here(tmp_path, "config", "show")
    assert result.returncode == 0, result.stderr
    assert "[urgent] list [all] models in [/tmp]" in result.stdout


def test_an_invalid_value_with_brackets_is_named_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "engine.yaml").write_text("processing:\n  debounceMs: '[/tmp] soon'\n", encoding="utf-8")
    result = klaw_here(tmp_path, "config", "check")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "[/tmp] soon" in result.stderr
    assert "processing.debounceMs" in result.stderr


def test_init_in_a_home_whose_path_has_brackets(tmp_path: Path) -> None:
    home = tmp_path / "[urgent]" / "klaw"
    result = klaw_here(home, "init")
    assert result.returncode == 0, result.stderr
    assert f"wrote  {home / 'engine.yaml'}" in result.stdout
    assert f"klaw home: {home}" in result.stdout


def test_schedule_list_shows_a_task_message_with_brackets(tmp_path: Path) -> None:
    added = klaw_here(tmp_path, "schedule", "add", "mom", "--every", "30m", "--message", "[urgent] call mom [/b]")
    assert added.returncode == 0, added.stderr
    listed = klaw_here(tmp_path, "schedule", "list")
    assert listed.returncode == 0, listed.stderr
    assert "[urgent] call mom [/b]" in listed.stdout


def test_schedule_list_into_a_pipe_keeps_each_date_whole(tmp_path: Path) -> None:
    """Into a pipe rich folded the table at 80 columns, cutting a date in two ("2026-11-2" / "7 13:07")."""
    message = "water the plants on the balcony, check the tomatoes"
    added = klaw_here(tmp_path, "schedule", "add", "plants", "--cron", "0 7 * * *", "--message", message)
    assert added.returncode == 0, added.stderr
    listed = klaw_here(tmp_path, "schedule", "list", env={"COLUMNS": ""})  # rich's own default, 80 columns
    assert listed.returncode == 0, listed.stderr
    [row] = [line for line in listed.stdout.splitlines() if "plants" in line]
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d", row) and message in row, listed.stdout
