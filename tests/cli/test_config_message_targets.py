"""A Telegram chat in `tools.messageTargets` that is not on `channels.telegram.allowedChatIds`: the
gateway drops whatever is delivered there while `message_send` said "Sent to …". `klaw config check`
(a real subprocess) names both lists and the fix, and nothing starts on such a file."""

from __future__ import annotations

from pathlib import Path

from tests.cli.klaw_here import klaw_here

TELEGRAM = "channels:\n  telegram:\n    enabled: true\n    allowedChatIds: [42]\n"


def test_a_telegram_target_off_the_bots_allow_list_is_refused_by_config_check(tmp_path: Path) -> None:
    home = tmp_path / "home"
    klaw_here(home, "init")
    config = home / "engine.yaml"
    written = "embedder:\n  backend: fake\n"
    config.write_text(written + TELEGRAM + "tools:\n  messageTargets: [telegram:42, telegram:99]\n")

    result = klaw_here(home, "config", "check")

    assert result.returncode == 2  # a configuration error, as for any invalid engine.yaml
    said = " ".join(result.stderr.split())
    assert (
        "tools.messageTargets names telegram:99, but 99 is not in channels.telegram.allowedChatIds (42), and the"
        " Telegram gateway drops anything for a chat not there: add 99 to channels.telegram.allowedChatIds, or"
        " take telegram:99 out of tools.messageTargets"
    ) in said
    assert "Traceback" not in result.stderr

    config.write_text(written + TELEGRAM + "tools:\n  messageTargets: [telegram:42, web:main]\n")
    assert klaw_here(home, "config", "check", env={"KLAW_TELEGRAM_TOKEN": "123:abc"}).returncode == 0
