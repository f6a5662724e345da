"""A broken skill was logged at every engine start: each `klaw chat` put the same two "skipped Bad_Skill /
missing link" lines into chat.log again (newcomer20, decision 489). Each problem is now logged once, when first
found by any klaw process on the home (KLAW_HOME/logs/skills_said), again only after it was gone; `klaw skills
check` and `klaw skills list` name it every time."""

from __future__ import annotations

from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import chat_env, init_home
from tests.cli.piped_chat import piped
from tests.cli.test_cli import klaw


def _bad(home: Path, name: str) -> None:
    folder = home / "workspace" / "skills" / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: x\n---\nbody\n")


async def test_a_broken_skill_is_logged_once_not_at_every_chat_start(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    _bad(home, "Bad_Skill")
    log = home / "logs" / "chat.log"
    async with FakeOpenAiServer() as model:
        env = chat_env(home, model.base_url)
        for text in ("one", "two", "three"):
            code, out, err = await piped(env, text)
            assert code == 0 and out == f"echo: {text}\n", err
        assert log.read_text().count("skill Bad_Skill/SKILL.md (skipped)") == 1, log.read_text()
        assert (home / "logs" / "skills_said").stat().st_mode & 0o777 == 0o600

        _bad(home, "Other_Bad")  # a new problem is logged, the old one not again
        assert (await piped(env, "four"))[0] == 0
        written = log.read_text()
        assert written.count("skill Other_Bad/SKILL.md (skipped)") == 1, written
        assert written.count("skill Bad_Skill/SKILL.md (skipped)") == 1, written

    for command in (("skills", "check"), ("skills", "list")):  # where skills matter: every time
        said = klaw(home, *command)
        assert "skipped: Bad_Skill/SKILL.md" in said.stdout + said.stderr, said
