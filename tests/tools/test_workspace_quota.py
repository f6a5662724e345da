"""The workspace's quota and the disk's free-space floor (decision 327), as a person meets them: the fake
model has code_execute (in the real sandbox) or file_write fill the workspace past
`tools.workspaceQuotaMb`, reads what happened in words, and the next turn of the chat still works; a
floor above the disk's free space refuses every tool write, naming the setting."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from klaw.tools.disk_room import DiskRoom, Usage, usage, used
from klaw.tools.sandbox import disk_watch
from tests.engine.harness import running_engine
from tests.own_disk import tmpfs
from tests.tools.workspace_turns import MIB, code_turn, needs_sandbox, sandboxed_engine, tool_turn

# Many files of 1 MiB each, one after another, far past a 4 MiB quota: no single file passes the
# file-size limit, so only the count of them all can stop it. It prints as it goes, then sleeps so a
# run that is not stopped would end by its wall time.
MANY_FILES = """
import os, time
os.makedirs("out", exist_ok=True)
for n in range(40):
    with open(f"out/part{n}.bin", "wb") as f:
        f.write(os.urandom(1024 * 1024))
    print("wrote", n, flush=True)
    time.sleep(0.05)
print("all written")
"""


@needs_sandbox
async def test_code_past_the_quota_is_stopped_its_files_kept_and_named_then_a_turn_works(tmp_path: Path) -> None:
    async with sandboxed_engine(tmp_path, workspaceQuotaMb=4) as h:
        (h.home.workspace / "keep.txt").write_text("mine\n", encoding="utf-8")
        content = await code_turn(h, "write forty megabytes", "python", MANY_FILES, "the disk filled up")
        assert content.startswith("stopped: the workspace passed its quota of 4 MiB (tools.workspaceQuotaMb)")
        assert "all written" not in content
        assert "over the bounds: the workspace holds" in content and "its quota is 4 MiB" in content
        assert "Delete files you no longer need" in content and "raise tools.workspaceQuotaMb" in content
        # named and kept, never removed: a snapshot cannot tell the run's files from others' (adversary11)
        assert "kept, created while the run went on: keep.txt" not in content
        assert "kept, created while the run went on: out/part0.bin" in content and "nothing was removed" in content
        assert list((h.home.workspace / "out").iterdir())
        assert (h.home.workspace / "keep.txt").read_text(encoding="utf-8") == "mine\n"
        for part in (h.home.workspace / "out").iterdir():
            part.unlink()  # the person deletes what is not needed; then code runs again

        content = await code_turn(h, "write a little", "shell", "echo small > small.txt; cat small.txt", "still fine")
        assert (
            content.startswith("exit code 0") and "stdout:\nsmall" in content and "files created: small.txt" in content
        )
        assert "over the bounds" not in content


@needs_sandbox
async def test_a_run_is_stopped_while_others_free_as_much_space_as_it_takes(tmp_path: Path) -> None:
    """CI80: on a busy machine other programs deleted files on the workspace's disk while a run wrote, so the
    disk's free space hardly moved, the watch never counted the workspace, and the run wrote 40 MiB past a
    4 MiB quota to its end. Here a file beside the home shrinks by 1 MiB as each 1 MiB part is written."""
    ballast = tmp_path / "ballast.bin"
    with ballast.open("wb") as out:
        for _ in range(48):
            out.write(os.urandom(MIB))
        out.flush()
        os.fsync(out.fileno())
    freeing = True

    async def free_as_it_writes() -> None:
        while freeing and ballast.stat().st_size > MIB:
            os.truncate(ballast, ballast.stat().st_size - MIB)
            await asyncio.sleep(0.05)

    async with sandboxed_engine(tmp_path, workspaceQuotaMb=4) as h:
        shrinking = asyncio.create_task(free_as_it_writes())
        try:
            content = await code_turn(h, "write forty megabytes", "python", MANY_FILES, "the disk filled up")
        finally:
            freeing = False
            await shrinking
        assert content.startswith("stopped: the workspace passed its quota of 4 MiB (tools.workspaceQuotaMb)"), content
        assert "all written" not in content


@needs_sandbox
async def test_no_file_grows_past_the_room_the_quota_leaves(tmp_path: Path) -> None:
    async with sandboxed_engine(tmp_path, workspaceQuotaMb=3) as h:
        (h.home.workspace / "log.txt").write_text("line one\n", encoding="utf-8")
        code = "with open('log.txt', 'ab') as f:\n    for _ in range(8):\n        f.write(b'x' * 1024 * 1024)\n"
        content = await code_turn(h, "append a lot", "python", code, "done")
        # the file-size limit is the room left (under 3 MiB), so the write itself fails before the quota
        assert "OSError: [Errno 27] File too large" in content and "files changed: log.txt" in content
        assert "so no file could grow past that in this run: a write beyond it failed with 'File too large'" in content
        assert (h.home.workspace / "log.txt").stat().st_size <= 3 * MIB
        assert used(h.home.workspace) <= 3 * MIB


# Empty files, slowly, in a folder of their own: no file grows (a run over the quota may grow none past a
# byte), but the folder's blocks do, so only the watch can stop it.
ADDING = "mkdir -p more; i=0; while [ $i -lt 3000 ]; do : > more/$i; i=$((i+1)); sleep 0.002; done; echo all made"


@needs_sandbox
async def test_over_the_quota_code_may_delete_what_the_refusal_says_but_not_add(tmp_path: Path) -> None:
    """adversary13: over a bound, the refusal told the model "code_execute can remove them", and the next
    code_execute was refused too: the chat was stuck until the person deleted by hand (decision 370)."""
    async with sandboxed_engine(tmp_path, workspaceQuotaMb=1) as h:
        (h.home.workspace / "big.bin").write_bytes(os.urandom(2 * MIB))
        (h.home.workspace / "old.bin").write_bytes(os.urandom(MIB // 2))
        content = await tool_turn(
            h, "save a note", [("file_write", {"path": "note.txt", "content": "x" * 10_000})], "it is full"
        )
        assert "its quota is 1 MiB" in content and "code_execute can remove them" in content

        content = await code_turn(h, "make more files", "shell", ADDING, "stopped")
        assert content.startswith("stopped: the workspace passed its quota of 1 MiB (tools.workspaceQuotaMb) with ")
        assert "all made" not in content

        content = await code_turn(h, "delete what you do not need", "shell", "rm -r big.bin more; echo gone", "deleted")
        assert content.startswith("exit code 0") and "gone" in content and "over the bounds" not in content
        assert not (h.home.workspace / "big.bin").exists()
        assert (h.home.workspace / "old.bin").stat().st_size == MIB // 2  # nothing else touched

        await tool_turn(h, "save a note", [("file_write", {"path": "note.txt", "content": "x" * 10_000})], "saved")
        assert h.last_request_messages()[-1]["content"].startswith("wrote 10000 bytes")


async def test_file_write_past_the_quota_is_refused_in_words_and_the_chat_goes_on(tmp_path: Path) -> None:
    async with running_engine(tmp_path, tools={"workspaceQuotaMb": 1}) as h:
        (h.home.workspace / "big.bin").write_bytes(os.urandom(MIB - 1000))
        content = await tool_turn(
            h, "save this", [("file_write", {"path": "notes/more.txt", "content": "y" * 100_000})], "no room"
        )
        assert "'notes/more.txt' was not written: the workspace holds" in content
        assert "this write adds 97.7 KiB" in content and "its quota is 1 MiB" in content
        assert not (h.home.workspace / "notes" / "more.txt").exists()
        h.server.reply_text("hello again")
        assert (await h.turn("hello")).text == "hello again"


async def test_a_floor_above_the_free_space_refuses_tool_writes_naming_the_setting(tmp_path: Path) -> None:
    floor_mb = 100_000_000  # about 95 TiB: more than any disk here has free
    async with running_engine(tmp_path, tools={"diskFloorMb": floor_mb}) as h:
        content = await tool_turn(
            h, "save hi", [("file_write", {"path": "a.txt", "content": "hi"})], "the disk is full"
        )
        assert "'a.txt' was not written: the disk holding the workspace (mounted at " in content
        assert "klaw keeps 97656.2 GiB free for its own memory and conversation log (tools.diskFloorMb" in content
        assert not (h.home.workspace / "a.txt").exists()


@needs_sandbox
async def test_code_runs_when_the_disk_is_under_the_floor_so_files_can_be_deleted(tmp_path: Path) -> None:
    async with sandboxed_engine(tmp_path, diskFloorMb=100_000_000) as h:
        (h.home.workspace / "old.txt").write_text("not needed\n", encoding="utf-8")
        content = await code_turn(h, "delete old.txt", "shell", "rm old.txt; echo gone", "deleted")
        assert content.startswith("exit code 0") and "gone" in content
        assert "over the bounds: the disk holding the workspace (mounted at " in content
        assert "(tools.diskFloorMb in engine.yaml)" in content and "free space on that disk" in content
        assert not (h.home.workspace / "old.txt").exists()


@needs_sandbox
async def test_code_leaving_less_than_the_floor_free_is_stopped_and_undone_then_a_turn_works(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", "96m") as disk:
        async with sandboxed_engine(disk, diskFloorMb=64) as h:
            content = await code_turn(h, "write forty megabytes", "python", MANY_FILES, "the disk is nearly full")
            assert content.startswith("stopped: the disk holding the workspace had only ")
            assert "under the 64 MiB klaw keeps for its own files (tools.diskFloorMb)" in content
            assert "all written" not in content and "kept, created while the run went on: out/part0.bin" in content
            assert list((h.home.workspace / "out").iterdir())  # kept: klaw cannot tell whose they are

            h.server.reply_text("still fine")
            assert (await h.turn("hello")).text == "still fine"


@needs_sandbox
async def test_a_file_the_run_renamed_survives_a_run_past_the_quota(tmp_path: Path) -> None:
    """adversary11: the undo once took `old/thesis.txt` for the run's own (it was the person's, renamed) and
    removed it, so the file was gone under both names. What a run wrote past a bound is now kept and named."""
    async with sandboxed_engine(tmp_path, workspaceQuotaMb=4) as h:
        (h.home.workspace / "thesis.txt").write_text("years of work\n", encoding="utf-8")
        code = 'import os\nos.makedirs("old")\nos.rename("thesis.txt", "old/thesis.txt")\n' + MANY_FILES
        content = await code_turn(h, "tidy up, then write forty megabytes", "python", code, "done")
        assert "over the bounds: the workspace holds" in content and "nothing was removed" in content
        assert (h.home.workspace / "old" / "thesis.txt").read_text(encoding="utf-8") == "years of work\n"


# 1 MiB every 10 ms, up to 100 MiB (adversary23's quota_big_workspace.py: beside 150,000 files a count took
# 4.5 s, the next waited ten times as long and the polls waited for each, so a run wrote 2.7 GiB against 64 MiB).
FAST_PARTS = """
import os, time
os.makedirs("out", exist_ok=True)
for n in range(100):
    with open(f"out/part{n}.bin", "wb") as f:
        f.write(bytes(1024 * 1024))
    time.sleep(0.01)
print("all written")
"""


def _many_files(folder: Path, files: int) -> None:
    folder.mkdir()
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for n in range(files):
            os.close(os.open(str(n), os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
    finally:
        os.close(fd)


@needs_sandbox
async def test_a_run_beside_many_files_is_stopped_within_the_quotas_margin(tmp_path: Path) -> None:
    # a disk of its own (memory): making the files is quick, and no other program's writes show on it
    with tmpfs(tmp_path / "disk", "192m") as disk:
        async with sandboxed_engine(disk, workspaceQuotaMb=4, workspaceQuotaFiles=40_000, diskFloorMb=0) as h:
            _many_files(h.home.workspace / "many", 15_000)  # a count of 0.1 s of CPU or more
            content = await code_turn(h, "write a hundred megabytes", "python", FAST_PARTS, "stopped")
            assert content.startswith("stopped: the workspace passed its quota of 4 MiB (tools.workspaceQuotaMb)")
            assert "all written" not in content
            written = sum(part.stat().st_blocks * 512 for part in (h.home.workspace / "out").iterdir())
            # the quota, its 16 MiB margin (disk_watch.MARGIN_BYTES) and what two polls let through at this rate
            assert written <= (4 + 16 + 28) * MIB, written


async def test_a_run_is_stopped_on_the_disks_loss_while_a_slow_count_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """adversary23 M1: beside 150,000 files a count took 4.5 s, and the watch looked at nothing meanwhile. Here
    each count takes a second more than it would, while 1 MiB is written every 20 ms: the disk's loss since the last
    count stops it once past the quota by the margin, without waiting for the count."""
    counted = usage

    def slow_usage(workspace: Path) -> Usage:
        time.sleep(1.0)
        return counted(workspace)

    monkeypatch.setattr(disk_watch, "usage", slow_usage)
    with tmpfs(tmp_path / "disk", "96m") as workspace:  # its own disk: others' writes or deletes do not show
        room = DiskRoom(quota_bytes=4 * MIB, floor_bytes=0).measure(workspace)
        stopping = asyncio.ensure_future(disk_watch.watch(room)())
        written = 0
        while not stopping.done() and written < 80 * MIB:
            (workspace / f"part{written // MIB}").write_bytes(bytes(MIB))
            written += MIB
            await asyncio.sleep(0.02)
        said = await asyncio.wait_for(stopping, 5)
    assert said.startswith(
        "the workspace passed its quota of 4 MiB (tools.workspaceQuotaMb), as far as klaw can tell without counting"
    ), said
    assert "more than the quota left plus 16 MiB for other programs' writes on that disk" in said
    assert written <= (4 + 16 + 16) * MIB
