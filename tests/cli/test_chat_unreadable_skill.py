"""A skill whose front matter PyYAML cannot read, through `klaw chat`, `klaw skills list` and `klaw tools`.

2 KB of nested `[` in `workspace/skills/deep/SKILL.md` (one `file_write` by a model could put it there)
made `yaml.safe_load` raise RecursionError, which the skills check did not catch: every turn of every chat
answered "Sorry, something went wrong", and `klaw skills list` and `klaw tools` ended in a traceback. A
date that is no date (`2020-13-45`) raised ValueError the same way. Now such a skill is left out with a
problem naming its file and what is wrong, and the chat goes on with the other skills."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import chat_env, init_home
from tests.cli.piped_chat import piped

DEEP = "---\nname: deep\ndescription: d\nx: " + "[" * 20000 + "]" * 20000 + "\n---\nbody\n"
BAD_DATE = "---\nname: bad-date\ndescription: d\nupdated: 2020-13-45\n---\nbody\n"
GOOD = "---\nname: weather-report\ndescription: Write a short weather report.\n---\nSay the temperature.\n"


def _skill(home: Path, name: str, text: str) -> None:
    folder = home / "workspace" / "skills" / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(text, encoding="utf-8")


def _klaw(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KLAW_HOME": str(home), "COLUMNS": "300"}
    return subprocess.run([sys.executable, "-m", "klaw", *args], capture_output=True, text=True, env=env, timeout=120)


async def test_a_skill_nested_too_deeply_is_left_out_and_the_chat_goes_on(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    for name, text in (("deep", DEEP), ("bad-date", BAD_DATE), ("weather-report", GOOD)):
        _skill(home, name, text)
    async with FakeOpenAiServer() as model:
        model.reply_text("Hello there.")
        code, out, err = await piped(chat_env(home, model.base_url), "hello?\n")
        assert (code, out) == (0, "Hello there.\n"), err
        system = " ".join(m["content"] for m in model.chat_requests[0].body["messages"] if m["role"] == "system")
        assert "- weather-report: Write a short weather report." in system  # the good skill still listed
        assert "- deep:" not in system and "- bad-date:" not in system
    log = (home / "logs" / "chat.log").read_text(encoding="utf-8")
    assert "RecursionError" not in log and "Traceback" not in log
    assert "deep/SKILL.md" in log and "nested too deeply" in log
    assert "[[[" not in log  # the file's content is never logged

    for args in (("skills", "list"), ("tools",)):
        result = _klaw(home, *args)
        said = " ".join(result.stdout.split())
        assert "Traceback" not in result.stderr + result.stdout, result.stderr
        assert "deep/SKILL.md: front matter nested too deeply" in said, said
        assert "bad-date/SKILL.md: front matter is not valid YAML (line 4, column 10): not a valid timestamp" in said
    checked = _klaw(home, "skills", "check")
    assert checked.returncode == 1 and "1 skill(s) usable, 2 left out" in checked.stdout


def test_config_check_names_a_nesting_or_value_yaml_cannot_read(tmp_path: Path) -> None:
    """engine.yaml goes through the same loader (klaw/yaml_syntax.py): a traceback before."""
    home = tmp_path / "home"
    init_home(home)
    config = home / "engine.yaml"
    original = config.read_text(encoding="utf-8")
    for text, said in (
        (original + "extra: " + "[" * 5000 + "]" * 5000 + "\n", "nested more than 64 levels deep"),
        (original + "processing:\n  debounceMs: !!int soon\n", "not a valid int"),
    ):
        config.write_text(text, encoding="utf-8")
        result = _klaw(home, "config", "check")
        assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
        assert said in " ".join((result.stdout + result.stderr).split())
