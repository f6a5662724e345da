"""`klaw bench locomo | past-sessions | recall`: retrieval quality on a LoCoMo-format file.

The three differ in what they run and how they report it; everything around that is one path
(`_run_bench`): read the home's config, build the run's settings (a bad option is a one-line error),
read the data set, run in a scratch directory with progress bars, write `NAME.json` and `NAME.md`,
show the Markdown.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from klaw.cli.bench_backends import UrlEnvOption
from klaw.cli.bench_output import emit, machine, machine_console, progress, stage_reporter

# (dataset, session notes or None, workbench, settings) -> result
Runner = Callable[[Any, Any, Any, Any], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class _Bench:
    """One LoCoMo benchmark: its output name, how it runs and how it reports."""

    name: str
    run: Runner
    to_json: Callable[..., dict[str, Any]]
    to_markdown: Callable[[Any], str]
    run_errors: tuple[type[Exception], ...]
    needs_notes: bool = True
    json_names_embedder: bool = True


def _csv(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _run_bench(bench: _Bench, data: Path, out: Path, settings_from: Callable[[Any], object]) -> None:
    from rich.markdown import Markdown

    from klaw.bench.locomo.annotations import load_session_notes
    from klaw.bench.locomo.dataset import LocomoFormatError, load_locomo
    from klaw.bench.locomo.workbench import Workbench
    from klaw.cli.context import fail, home_from_env, load_or_exit
    from klaw.memory.embedder.factory import create_embedder

    home = home_from_env(must_exist=False)
    config = load_or_exit(home).config
    try:
        data.open("rb").close()  # first: a path mistyped is said before a database out of reach (502)
        settings = settings_from(config)
        dataset = load_locomo(data)
        notes = load_session_notes(data, dataset) if bench.needs_notes else None
    except (ValueError, LocomoFormatError) as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot read {data}: {exc.strerror or exc}")
    embedder = create_embedder(config.embedder, cache_dir=home.embedder_cache)
    started_at = datetime.now(UTC).isoformat(timespec="seconds")

    async def run(work_dir: Path) -> Any:
        try:
            with progress() as bars:
                return await bench.run(dataset, notes, Workbench(embedder, work_dir, stage_reporter(bars)), settings)
        finally:
            await embedder.aclose()

    with tempfile.TemporaryDirectory(prefix="klaw-bench-") as tmp:
        try:
            result = asyncio.run(run(Path(tmp)))
        except bench.run_errors as exc:
            fail(str(exc), 1)
    extra = {"embedder_config": config.embedder.model_dump(mode="json")} if bench.json_names_embedder else {}
    markdown = bench.to_markdown(result)
    emit(bench.to_json(result, machine=machine(), started_at=started_at, **extra), out / f"{bench.name}.json")
    (out / f"{bench.name}.md").write_text(markdown, encoding="utf-8")
    console = machine_console()
    if console.is_terminal:
        console.print(Markdown(markdown))
    else:  # into a file: the Markdown itself, its tables whole (rich drew them cut at 80 columns: newcomer20)
        console.out(markdown, highlight=False)
    console.print(f"wrote {out / f'{bench.name}.json'} and {out / f'{bench.name}.md'}")


def locomo(
    data: Annotated[Path, typer.Option(help="A LoCoMo-format JSON file (locomo10.json or a split of it).")],
    out: Annotated[Path, typer.Option(help="Directory for locomo.json and locomo.md.")] = Path("bench-results"),
    variants: Annotated[str, typer.Option(help="Comma-separated retrieval variants.")] = "hybrid,vector,fts",
    backend: Annotated[
        list[str] | None,
        typer.Option(
            metavar="BACKEND",
            help="sqlite or postgres (repeatable: each in turn on the same vectors; default database.backend).",
        ),
    ] = None,
    url_env: UrlEnvOption = None,
) -> None:
    """Retrieval quality on LoCoMo: evidence recall of hybrid, vector-only and full-text-only search
    through the real ingestion and search path, with the configured embedder."""
    from klaw.bench.locomo.backends import run_on_backends, to_json, to_markdown
    from klaw.bench.locomo.runner import LocomoRunError, RunSettings
    from klaw.cli.bench_backends import backend_databases, unusable_backend

    def run(dataset: Any, _notes: Any, bench: Any, settings: Any) -> Awaitable[Any]:
        return run_on_backends(dataset, bench, settings)

    def settings_from(config: Any) -> dict[str, RunSettings]:
        databases = backend_databases(config.database, backend or [config.database.backend], url_env)
        unusable = unusable_backend(databases)
        if unusable is not None and not backend and config.database.backend != "sqlite":
            # the person typed no backend: say where it came from, and the way that needs no server (489)
            from klaw.cli.context import home_from_env

            where = home_from_env(must_exist=False).config_file
            raise ValueError(
                f"klaw bench locomo on {unusable}. No --backend was given, so it is the home's database.backend"
                f" ({config.database.backend}, {where}); --backend sqlite runs the bench on a throwaway SQLite"
                " file instead"
            )
        if unusable is not None:
            raise ValueError(f"klaw bench locomo on {unusable}")
        return {
            name: RunSettings(
                variants=_csv(variants),
                min_embed_tokens=config.auto_rag.min_message_tokens,
                batch_size=config.embedder.batch_size,
                search=config.search,
                database=database,
            )
            for name, database in databases.items()
        }

    _run_bench(
        _Bench("locomo", run, to_json, to_markdown, (LocomoRunError,), needs_notes=False), data, out, settings_from
    )


def past_sessions(
    data: Annotated[Path, typer.Option(help="A LoCoMo-format JSON file with session summaries and observations.")],
    out: Annotated[Path, typer.Option(help="Directory for past_sessions.json and .md.")] = Path("bench-results"),
    exchange_texts: Annotated[str, typer.Option(help="Comma-separated exchange texts: turns, facts.")] = "turns,facts",
    names: Annotated[str, typer.Option(help="Comma-separated ways of naming the speakers: kept, neutral.")] = (
        "kept,neutral"
    ),
) -> None:
    """How similar a new message is to the summaries of the past segments holding its answer, through
    past-conversation retrieval with the configured embedder: where `rag.minSimilarity` should sit."""
    from klaw.bench.locomo.past_sessions import PastRunSettings, run_past_sessions
    from klaw.bench.locomo.past_sessions_chat import PastSessionsRunError
    from klaw.bench.locomo.past_sessions_report import to_json, to_markdown

    def settings_from(config: Any) -> PastRunSettings:
        return PastRunSettings(
            exchange_texts=_csv(exchange_texts),
            names=_csv(names),
            batch_size=config.embedder.batch_size,
            rag=config.rag,
        )

    bench = _Bench("past_sessions", run_past_sessions, to_json, to_markdown, (PastSessionsRunError,))
    _run_bench(bench, data, out, settings_from)


def recall(
    data: Annotated[Path, typer.Option(help="A LoCoMo-format JSON file with session summaries and observations.")],
    out: Annotated[Path, typer.Option(help="Directory for recall.json and recall.md.")] = Path("bench-results"),
    layers: Annotated[str, typer.Option(help="Comma-separated layers: auto_rag, past.")] = "auto_rag,past",
) -> None:
    """What reaches the model: each LoCoMo question asked as a live turn, and what the auto-RAG and
    past-conversations blocks would hold with the settings in force (context recall, false injection)."""
    from klaw.bench.locomo.recall_bench import RecallSettings, run_recall
    from klaw.bench.locomo.recall_report import to_json, to_markdown
    from klaw.bench.locomo.runner import LocomoRunError

    def settings_from(config: Any) -> RecallSettings:
        return RecallSettings(
            layers=_csv(layers),
            auto_rag=config.auto_rag,
            search=config.search,
            rag=config.rag,
            sliding_window=config.context.sliding_window,
            batch_size=config.embedder.batch_size,
        )

    bench = _Bench("recall", run_recall, to_json, to_markdown, (LocomoRunError,), json_names_embedder=False)
    _run_bench(bench, data, out, settings_from)
