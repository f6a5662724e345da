"""A broken skill is said where skills matter (`klaw config check`, `klaw skills check`, the log once per
start), not on every piped `klaw chat`: before, each `echo … | klaw chat` (even `echo /stauts`) printed
"(klaw logged a warning: see …chat.log)" for it."""

from __future__ import annotations

from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import chat_env, init_home
from tests.cli.piped_chat import piped
from tests.cli.test_cli import klaw


async def test_a_broken_skill_is_in_config_check_and_the_log_not_on_each_piped_chat(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    broken = home / "workspace" / "skills" / "bad"
    broken.mkdir(parents=True)
    (broken / "SKILL.md").write_text("no front matter here\n")
    async with FakeOpenAiServer() as model:
        env = chat_env(home, model.base_url)
        code, out, err = await piped(env, "hello there")
        assert code == 0 and out == "echo: hello there\n", err
        assert "klaw logged a warning" not in err, err
        _, out, err = await piped(env, "/stauts")
        assert "Unknown command /stauts" in out + err and "klaw logged a warning" not in out + err, err
    assert "skill bad/SKILL.md (skipped)" in (home / "logs" / "chat.log").read_text()
    checked = klaw(home, "config", "check")
    assert "skipped: bad/SKILL.md" in checked.stdout + checked.stderr
