"""`klaw db migrate`'s search check: sample queries searched in klaw.db and in PostgreSQL, with a progress
bar and the differences by message id (the work is `memory/search_parity.py`; never a message's text)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from klaw.cli.context import open_store_or_exit
from klaw.cli.reindex_cmd import stage_bars
from klaw.home import KlawHome

if TYPE_CHECKING:  # loaded by the commands that use them, so `klaw --help` loads none of it
    from klaw.config import DatabaseConfig, EngineConfig
    from klaw.memory.embedder.protocol import Embedder
    from klaw.memory.search_parity import ParityReport, QueryDifference
    from klaw.store.protocol import Storage

SHOWN = 10  # differences listed that mean something was lost; the count says how many there are
SHOWN_RANKING = 3  # full-text rankings that differ, listed as examples
_IDS = 3  # ids listed per difference


async def check_searches(
    console: Console,
    home: KlawHome,
    config: EngineConfig,
    stores: tuple[Path, DatabaseConfig, DatabaseConfig],
    samples: int,
) -> bool:
    """Search both stores with `samples` message texts; prints the outcome, False on a difference that
    means the move lost or misplaced something."""
    from klaw.memory.embedder.protocol import EmbedderError
    from klaw.memory.search_parity import compare_searches, sample_messages
    from klaw.store.protocol import StorageError

    sqlite_file, source_config, target_config = stores
    source = await open_store_or_exit(sqlite_file, source_config)
    target = await open_store_or_exit(sqlite_file, target_config)
    embedder: Embedder | None = None
    try:
        embedder, why_not = await _vector_embedder(home, config, source, target)
        chosen = await sample_messages(source, samples)
        progress = stage_bars(console)
        with progress:
            task = progress.add_task("comparing searches", total=len(chosen))
            report = await compare_searches(
                source, target, chosen, embedder, lambda done, total: progress.update(task, completed=done, total=total)
            )
    except (StorageError, EmbedderError) as exc:
        console.print(f"warning: the search check could not run: {exc}")
        return False
    finally:
        if embedder is not None:
            await embedder.aclose()
        await source.aclose()
        await target.aclose()
    _print(console, report, why_not)
    return report.ok


async def _vector_embedder(
    home: KlawHome, config: EngineConfig, source: Storage, target: Storage
) -> tuple[Embedder | None, str]:
    """The configured embedder when both stores hold the same vectors of it, else None and why not."""
    from klaw.memory.embedder.factory import create_embedder

    old, new = await source.vectors.bound_embedder(), await target.vectors.bound_embedder()
    if old is None or new is None:
        return None, "no vectors on one side"
    if (old.embedder_id, old.dim) != (new.embedder_id, new.dim):
        # a program's config= or embedder= made klaw.db's vectors; the move embeds with engine.yaml's (539)
        return None, (
            f"klaw.db's vectors are of {old.embedder_id} (dim {old.dim}), PostgreSQL's of {new.embedder_id}"
            f" (dim {new.dim}), the embedder engine.yaml names, which the move embedded with. A program that gave"
            " klaw.db its own embedder (config= or embedder=) is refused on PostgreSQL until it gives this one;"
            f" or set engine.yaml's embedder to {old.embedder_id}'s and run 'klaw reindex', which embeds again"
        )
    old_count, new_count = await source.vectors.count(), await target.vectors.count()
    if old_count != new_count:
        # Why they differ, and whether anything is lost, is said under the counts (cli/vector_gap.py).
        return None, f"klaw.db holds {old_count} message vectors, PostgreSQL {new_count}: see above why"
    return create_embedder(config.embedder, cache_dir=home.embedder_cache), ""


def _print(console: Console, report: ParityReport, why_not: str) -> None:
    from klaw.memory.search_parity import HITS

    n = report.queries
    console.print(f"search check: {n} sample queries (texts of stored messages, each in its own chat), top {HITS}")
    if report.vector_compared:
        console.print(f"  vector search: {report.vector_equal} of {n} equal")
    else:
        console.print(f"  vector search: not compared ({why_not})")
    other = n - report.full_text_equal - report.full_text_same_set
    shared = f"{report.full_text_shared} of {report.full_text_hits}"
    console.print(
        f"  full text: {report.full_text_equal} equal, {report.full_text_same_set} the same hits in another order,"
        f" {other} other hits (each backend ranks its own way); {shared} of klaw.db's hits found in PostgreSQL"
        f" too; {report.full_text_own_found} of {n} samples found their own message on both"
    )
    ranked_apart = [d for d in report.differences if not d.order_only]
    if ranked_apart:
        # Expected, not a loss: worded as rankings (newcomer20 read "not found in PostgreSQL" as lost data).
        intact = (
            ""
            if report.failures
            else "; the messages themselves are all there (the counts above, and each sample's own message"
            " found on both)"
        )
        console.print(
            f"  full text ranked otherwise in {len(ranked_apart)} sample(s) (expected: SQLite's FTS5 and PostgreSQL"
            f" rank words their own way){intact}; for example:",
            soft_wrap=True,
        )
    for difference in ranked_apart[:SHOWN_RANKING]:
        console.print(f"    {_ranking_line(difference)}", soft_wrap=True)
    if len(ranked_apart) > SHOWN_RANKING:
        console.print(f"    … and {len(ranked_apart) - SHOWN_RANKING} more samples ranked differently")
    if report.failures:
        console.print(
            f"warning: {len(report.failures)} search(es) differ where klaw.db and PostgreSQL must agree: a message"
            " is missing or misplaced in one of them. Run 'klaw reindex' on the SQLite home and move again"
            " into an empty database, or report it:"
        )
        for difference in report.failures[:SHOWN]:
            console.print(f"  {_line(difference)}", soft_wrap=True)


def _line(difference: QueryDifference) -> str:
    """One difference by message ids (never their text)."""
    if difference.search == "stored message":
        return f"sample {difference.message_id}: missing in PostgreSQL, or stored there otherwise than in klaw.db"
    if difference.order_only:
        return f"{difference.search}, sample {difference.message_id}: the same hits in another order"
    parts = []
    if difference.missing:
        parts.append(f"not found in PostgreSQL: {_ids(difference.missing)}")
    if difference.extra:
        parts.append(f"found only in PostgreSQL: {_ids(difference.extra)}")
    return f"{difference.search}, sample {difference.message_id}: {'; '.join(parts)}"


def _ranking_line(difference: QueryDifference) -> str:
    """A full-text ranking that differs, by message ids: which hits each backend ranked in its top, not
    where a message is (a message outside one backend's top is still stored there)."""
    parts = []
    if difference.missing:
        parts.append(f"in klaw.db's top only: {_ids(difference.missing)}")
    if difference.extra:
        parts.append(f"in PostgreSQL's top only: {_ids(difference.extra)}")
    return f"sample {difference.message_id}: {'; '.join(parts)}"


def _ids(ids: tuple[str, ...]) -> str:
    more = f" and {len(ids) - _IDS} more" if len(ids) > _IDS else ""
    return ", ".join(ids[:_IDS]) + more
