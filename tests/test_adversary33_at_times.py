"""adversary33 (decision 542 item 5): a `--at` time the scheduler's time zone skips (the clocks go forward) was
moved an hour on without a word; one it shows twice (they go back) was the first, silently. `klaw` as typed,
through its own entry point, a real scheduler.db."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.scheduling.task_store import ScheduleStore
from tests.cli.klaw_here import klaw_here


def test_an_at_time_the_clocks_skip_is_refused_and_one_they_show_twice_is_said(tmp_path: Path) -> None:
    home = KlawHome(tmp_path / "home")
    initialise_home(home)
    (home.root / "engine.yaml").write_text("scheduler:\n  timezone: Europe/Berlin\n", encoding="utf-8")
    gap = klaw_here(home.root, "schedule", "add", "spring", "--at", "2027-03-28 02:30", "-m", "x")
    said = " ".join(gap.stderr.split())
    assert gap.returncode == 2, gap
    assert (
        "'2027-03-28 02:30' is no time in Europe/Berlin: its clocks go from 2027-03-28 02:00 straight to 03:00" in said
    )
    assert "give '2027-03-28 01:59' or '2027-03-28 03:00'" in said, said
    twice = klaw_here(home.root, "schedule", "add", "autumn", "--at", "2027-10-31 02:30", "-m", "x")
    assert twice.returncode == 0, twice.stderr
    assert (
        "Added autumn: once at 2027-10-31 02:30+02:00 (the first 02:30 of the night the clocks go back; the other is"
        " '2027-10-31T02:30+01:00')" in " ".join(twice.stdout.split())
    ), twice.stdout
    second = klaw_here(home.root, "schedule", "add", "later", "--at", "2027-10-31T02:30+01:00", "-m", "x")
    assert "once at 2027-10-31 02:30+01:00 (the second 02:30" in " ".join(second.stdout.split()), second.stdout
    (first,) = [task for task in ScheduleStore(home.scheduler_db).list() if task.name == "autumn"]
    assert first.next_run_at == datetime(2027, 10, 31, 0, 30, tzinfo=UTC)
