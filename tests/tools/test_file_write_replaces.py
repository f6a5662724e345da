"""`file_write` replacing a file writes the new content beside it and renames it over (decision 371): a
write that fails, on a disk too full for the copy, leaves the person's file whole, where truncating it
first left it empty (adversary13); its mode is kept, and a file of several hard-linked names stays one."""

from __future__ import annotations

import os
from pathlib import Path

from tests.engine.harness import running_engine
from tests.own_disk import tmpfs

MIB = 1024 * 1024


async def test_a_replacement_the_disk_cannot_hold_beside_the_old_file_is_refused_and_the_file_kept(
    tmp_path: Path,
) -> None:
    with tmpfs(tmp_path / "disk", "32m") as disk:
        async with running_engine(disk, tools={"diskFloorMb": 4}) as h:
            mine = os.urandom(MIB // 2).hex()  # 1 MiB of the person's text
            (h.home.workspace / "thesis.txt").write_text(mine, encoding="utf-8")
            filler = disk / "filler"
            with filler.open("wb") as f:  # the rest of the disk taken, but for a little
                free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
                f.write(b"\0" * (free - 9 * MIB // 2))  # the floor and half a MiB: not the copy too
            h.server.reply_tool_calls([("file_write", {"path": "thesis.txt", "content": "y" * (MIB - 100)})])
            h.server.reply_text("no room")
            await h.turn("rewrite it")
            content = h.last_request_messages()[-1]["content"]
            assert "'thesis.txt' was not written: the disk holding the workspace (mounted at " in content
            assert (h.home.workspace / "thesis.txt").read_text(encoding="utf-8") == mine
            assert [p.name for p in h.home.workspace.iterdir() if p.name.endswith(".tmp")] == []
            filler.unlink()  # room again: the same write goes through
            h.server.reply_tool_calls([("file_write", {"path": "thesis.txt", "content": "y" * (MIB - 100)})])
            h.server.reply_text("done")
            await h.turn("rewrite it")
            assert h.last_request_messages()[-1]["content"] == f"wrote {MIB - 100} bytes to thesis.txt"
            assert (h.home.workspace / "thesis.txt").read_text(encoding="utf-8") == "y" * (MIB - 100)


async def test_a_replaced_file_keeps_its_mode_and_a_hard_linked_one_stays_one_file(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        shared = h.home.workspace / "shared.txt"
        shared.write_text("old\n", encoding="utf-8")
        shared.chmod(0o640)
        (h.home.workspace / "data").mkdir()
        os.link(h.home.workspace / "data" / ".." / "shared.txt", h.home.workspace / "data" / "twin.txt")
        (h.home.workspace / "plain.txt").write_text("old\n", encoding="utf-8")
        (h.home.workspace / "plain.txt").chmod(0o644)
        h.server.reply_tool_calls(
            [
                ("file_write", {"path": "shared.txt", "content": "new\n"}),
                ("file_write", {"path": "plain.txt", "content": "new\n"}),
            ]
        )
        h.server.reply_text("done")
        await h.turn("update them")
        assert (h.home.workspace / "data" / "twin.txt").read_text(encoding="utf-8") == "new\n"
        assert (h.home.workspace / "plain.txt").read_text(encoding="utf-8") == "new\n"
        assert (h.home.workspace / "plain.txt").stat().st_mode & 0o777 == 0o644
        assert shared.stat().st_mode & 0o777 == 0o640
