"""The workspace's quota as a person meets its edges (decisions 361, 362): many empty files, which take no
blocks, are bounded by `tools.workspaceQuotaFiles` (a run making them is stopped, the next refused, both in
words); a file of several hard-linked names counts once, as `du` counts it; and `file_write` replacing a
file counts what the write changes, not its whole size."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.engine.harness import running_engine
from tests.tools.workspace_turns import MIB, code_turn, needs_sandbox, sandboxed_engine, tool_turn

# Empty files, a few hundred at a time, far past a limit of 300: they take no blocks, so only their count
# can stop it. A run that is not stopped prints "all made" (or ends by its wall time).
FILE_BOMB = """
import os, time
os.makedirs("bomb", exist_ok=True)
for n in range(20000):
    open(f"bomb/{n}", "w").close()
    if n % 200 == 0:
        print("made", n, flush=True)
        time.sleep(0.05)
print("all made")
"""


@needs_sandbox
async def test_code_making_files_past_the_file_quota_is_stopped_and_the_advised_rm_runs(tmp_path: Path) -> None:
    async with sandboxed_engine(tmp_path, workspaceQuotaFiles=300) as h:
        content = await code_turn(h, "make twenty thousand files", "python", FILE_BOMB, "too many files")
        assert content.startswith(
            "stopped: the workspace passed its limit of 300 files and folders (tools.workspaceQuotaFiles) with "
        )
        assert "all made" not in content
        assert "over the bounds: the workspace holds " in content
        assert "files and folders, and it may hold at most 300 files and folders (tools.workspaceQuotaFiles" in content
        assert "rm -r a folder of many" in content and "raise tools.workspaceQuotaFiles" in content
        made = len(os.listdir(h.home.workspace / "bomb"))
        assert 300 < made < 20000  # kept (decision 327's addendum), and far fewer than asked for

        content = await code_turn(h, "make them again", "python", FILE_BOMB, "still too many")
        assert content.startswith("stopped: the workspace passed its limit of 300 files and folders")
        assert "all made" not in content  # a run over a bound may delete (decision 370), not add

        content = await tool_turn(
            h, "note it", [("file_write", {"path": "notes/todo.txt", "content": "tidy up"})], "no room for a note"
        )
        assert "'notes/todo.txt' was not written: the workspace holds " in content
        assert "this write adds 2 files and folders" in content and "rm -r a folder of many" in content
        # what the refusal advises now runs (adversary13: it was refused too, and the chat was stuck)
        content = await code_turn(
            h, "remove the folder of many", "shell", "rm -r bomb; touch ran; echo ok", "fine again"
        )
        assert content.startswith("exit code 0") and "over the bounds" not in content
        assert not (h.home.workspace / "bomb").exists() and (h.home.workspace / "ran").exists()


@needs_sandbox
async def test_hard_links_to_one_file_count_once(tmp_path: Path) -> None:
    """adversary11: 3 MiB linked under three names read as 9 MiB, over a 4 MiB quota, and then every write
    was refused although the links add no data (du counts it once)."""
    async with sandboxed_engine(tmp_path, workspaceQuotaMb=4) as h:
        (h.home.workspace / "data.bin").write_bytes(os.urandom(3 * MIB))
        code = "ln data.bin a.bin; ln data.bin b.bin; echo linked"
        content = await code_turn(h, "link it twice", "shell", code, "linked")
        assert "stdout:\nlinked" in content and "files created: a.bin, b.bin" in content
        assert "over the bounds" not in content

        await tool_turn(h, "note hi", [("file_write", {"path": "note.txt", "content": "hi"})], "noted")
        assert h.last_request_messages()[-1]["content"] == "wrote 2 bytes to note.txt"


async def test_file_write_replacing_a_big_file_counts_the_change_not_the_whole(tmp_path: Path) -> None:
    async with running_engine(tmp_path, tools={"workspaceQuotaMb": 2}) as h:
        (h.home.workspace / "draft.txt").write_text("x" * (MIB + MIB // 2), encoding="utf-8")
        # replacing 1.5 MiB by 1 MiB frees room: the old count (1 MiB more, over 2 MiB) refused it
        await tool_turn(
            h, "rewrite the draft shorter", [("file_write", {"path": "draft.txt", "content": "y" * MIB})], "replaced"
        )
        assert h.last_request_messages()[-1]["content"] == f"wrote {MIB} bytes to draft.txt"
        assert (h.home.workspace / "draft.txt").stat().st_size == MIB

        # growing it still counts what it adds: 1 MiB appended to 1 MiB of 2 MiB passes the quota
        content = await tool_turn(
            h, "add a chapter", [("file_write", {"path": "draft.txt", "content": "z" * MIB, "append": True})], "no room"
        )
        assert "'draft.txt' was not written: the workspace holds 1 MiB; this write adds 1 MiB" in content
        assert (h.home.workspace / "draft.txt").stat().st_size == MIB


async def test_file_writes_of_one_answer_are_measured_one_at_a_time(tmp_path: Path) -> None:
    """adversary13: 32 file_write calls in one answer were all measured before any wrote, and made 1,031
    entries against a limit of 300; now each is measured after the one before it wrote."""
    deep = "/".join(["d"] * 30)
    calls = [("file_write", {"path": f"p{n}/{deep}/f.txt", "content": "x"}) for n in range(32)]
    async with running_engine(tmp_path, tools={"workspaceQuotaFiles": 300}) as h:
        h.server.reply_tool_calls(calls)
        h.server.reply_text("some did not fit")
        assert (await h.turn("write them all")).text == "some did not fit"
        results = [m["content"] for m in h.last_request_messages() if m.get("role") == "tool"]
        held = sum(1 for _ in h.home.workspace.rglob("*"))
        assert held <= 300
        written = [r for r in results if r.startswith("wrote 1 bytes")]
        refused = [r for r in results if "was not written: the workspace holds" in r]
        assert len(written) == sum(1 for _ in h.home.workspace.rglob("f.txt")) and written
        assert len(written) + len(refused) == 32 and refused
        assert all("this write adds 32 files and folders" in r for r in refused)


async def test_file_write_into_a_home_without_its_workspace_makes_it(tmp_path: Path) -> None:
    """webhost: on a home `klaw init` never set up, measuring the missing workspace raised FileNotFoundError,
    which the model read as "tool raised"; the write itself makes the folder."""
    async with running_engine(tmp_path) as h:
        shutil.rmtree(h.home.workspace)
        await tool_turn(h, "note it", [("file_write", {"path": "notes/todo.txt", "content": "tidy up"})], "written")
        assert h.last_request_messages()[-1]["content"] == "wrote 7 bytes to notes/todo.txt"
        assert (h.home.workspace / "notes" / "todo.txt").read_text(encoding="utf-8") == "tidy up"
        assert h.home.workspace.stat().st_mode & 0o777 == 0o700
