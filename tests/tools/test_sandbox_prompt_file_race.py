"""code_execute's read-only prompt files and skills/ while other code swaps one for a symlink leading out, as
code run at the same time in a second sandbox can (its workspace is the same folder): what the sandbox
shows must be what klaw checked, never where a symlink swapped in meanwhile leads (KLAW_HOME's web token).
The real sandbox (bubblewrap, its backend called as code_execute calls it) runs the attacker's code
again and again, several runs at once, while a flipper exchanges the protected name with a symlink
(renameat2 RENAME_EXCHANGE, the attack of decision 243). Binding by path, or by descriptor
(`--ro-bind-fd`, which bwrap turns back into a path), showed the token: bwrap creates the file the
symlink names (`/web_token` in the sandbox's root), mounts the source, resolved through the symlink too,
onto it, then checks the destination once the real file is back (decision 283). The attacker's code
looks there as well as at the name itself. A race: the old code leaked in a few runs of a hundred, fewer
when the machine is busy (the flipper must run while bwrap sets up); RACE_RUNS=1000 looks harder."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from klaw.home import KlawHome
from klaw.tools.sandbox.backend import Job, SandboxBackend
from tests.tools.sandbox_helpers import backend_or_skip, home_with_secrets
from tests.tools.test_workspace_races import _FLIPPER

RUNS = int(os.environ.get("RACE_RUNS", "300"))
AT_ONCE = 4  # runs at once: bwrap's setup meets the flipper at more moments, as under load
SECRET = "secret-web-token"
PROMPT_FILES = ("SOUL.md", "IDENTITY.md", "AGENTS.md")
READ_AND_WRITE = "cat *.md; echo; cat /web_token 2>/dev/null; echo tampered >> SOUL.md && echo WROTE"
FOLDERS = ("skills/", "more-skills/", "other-skills/")
SKILL_AND_OUTSIDE = "cat *skills/s/SKILL.md; echo; cat /tmp/secret.txt *skills/secret.txt 2>/dev/null"

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="renameat2 and bubblewrap are Linux's")


@pytest.fixture
def flip() -> Iterator[Callable[[Path, Path], None]]:
    """Start a flipper exchanging two paths as fast as it can (code in a second sandbox run); stopped at the end."""
    started: list[subprocess.Popen[str]] = []

    def start(real: Path, link: Path) -> None:
        process = subprocess.Popen(
            [sys.executable, "-c", _FLIPPER, str(real), str(link)], stdout=subprocess.PIPE, text=True
        )
        started.append(process)
        assert process.stdout is not None and process.stdout.readline() == "ready\n"

    yield start
    for process in started:
        assert process.poll() is None, "the flipper stopped early"
        process.kill()
        process.wait()


async def run_many(backend: SandboxBackend, workspace: Path, read_only: tuple[str, ...], code: str) -> list[str]:
    """`code` run RUNS times by the backend, AT_ONCE at a time: the seam whose promise this is. Through
    code_execute, a run whose protected name is a symlink at the moment it is judged is refused before the
    backend starts (decision 286), which hides half the races or more, not the window."""
    answers: list[str] = []
    for first in range(0, RUNS, AT_ONCE):
        jobs = [Job("shell", code, workspace, 10, read_only) for _ in range(first, min(first + AT_ONCE, RUNS))]
        answers += ["\n".join(outcome.report()) for outcome in await asyncio.gather(*map(backend.run, jobs))]
    return answers


def bubblewrap_or_skip(home: KlawHome) -> SandboxBackend:
    backend, _ = backend_or_skip(home, backend="bubblewrap")
    return backend


async def test_a_prompt_file_swapped_for_a_symlink_out_never_shows_its_target(
    tmp_path: Path, flip: Callable[[Path, Path], None]
) -> None:
    home = home_with_secrets(tmp_path)
    backend = bubblewrap_or_skip(home)
    workspace = home.workspace
    for name in PROMPT_FILES:  # each a chance per run
        (workspace / name).write_text("the decoy soul", encoding="utf-8")
        (workspace / f"link-{name}").symlink_to(Path("..") / home.web_token_file.name)  # KLAW_HOME/web_token
        flip(workspace / name, workspace / f"link-{name}")
    answers = await run_many(backend, workspace, PROMPT_FILES, READ_AND_WRITE)
    assert not [answer for answer in answers if SECRET in answer]
    assert any("the decoy soul" in answer for answer in answers), answers[:3]  # the flipper let the code run


async def test_the_skills_folder_swapped_for_a_symlink_out_never_shows_its_target(
    tmp_path: Path, flip: Callable[[Path, Path], None]
) -> None:
    """A folder of KLAW_HOME named like one of the sandbox's own (`tmp`): bwrap mounts onto an existing
    folder only, so the symlink `../tmp` lands the source, KLAW_HOME/tmp, on the sandbox's /tmp."""
    home = home_with_secrets(tmp_path)
    (home.root / "tmp").mkdir()
    (home.root / "tmp" / "secret.txt").write_text(SECRET, encoding="utf-8")
    backend = bubblewrap_or_skip(home)
    workspace = home.workspace
    for folder in FOLDERS:  # skills/ and two more guarded the same way: each a chance per run
        (workspace / folder / "s").mkdir(parents=True)
        (workspace / folder / "s" / "SKILL.md").write_text("the decoy skill", encoding="utf-8")
        (workspace / f"link-{folder[:-1]}").symlink_to(Path("..") / "tmp")
        flip(workspace / folder, workspace / f"link-{folder[:-1]}")
    answers = await run_many(backend, workspace, FOLDERS, SKILL_AND_OUTSIDE)
    assert not [answer for answer in answers if SECRET in answer]
    assert any("the decoy skill" in answer for answer in answers), answers[:3]
