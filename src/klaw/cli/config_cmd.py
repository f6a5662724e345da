"""`klaw config show|path|check`."""

from __future__ import annotations

import asyncio
import json
import os
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from klaw.cli.context import fail, home_from_env, home_source, load_or_exit, stderr_console, table_console
from klaw.cli.gateway_cmd import telegram_token_problem
from klaw.cli.service_env import SERVICE_ENV, names_in
from klaw.disk_trouble import unwritable
from klaw.home import KlawHome

if TYPE_CHECKING:
    from klaw.config import EngineConfig
    from klaw.config_view import ConfigOverride
    from klaw.tools.inventory import ToolRow

app = typer.Typer(
    rich_markup_mode="markdown", help="Inspect the engine configuration (engine.yaml).", no_args_is_help=True
)


@app.command()
def show(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON: {field: {value, source}}.")] = False,
    reveal: Annotated[bool, typer.Option("--reveal", help="Show passwords in URLs instead of a mask.")] = False,
) -> None:
    """Print every effective setting and where it came from (default, engine.yaml, env, or a chat command).

    These are the values an engine started from this home's files uses. A program running
    `Klaw(home, config={...})` uses its own configuration instead: while it runs, a line below the
    table says so (the home's lock names it)."""
    from klaw.config_view import config_rows, shown

    home = home_from_env()
    loaded = load_or_exit(home)
    overrides, note = asyncio.run(_command_overrides(home, loaded.config))
    # masked: this output gets pasted into bug reports and chats
    rows = config_rows(loaded, mask=not reveal, overrides=overrides)
    elsewhere = _program_config(home)
    if as_json:
        typer.echo(json.dumps({row.field: {"value": row.value, "source": row.source} for row in rows}, indent=2))
        if elsewhere:  # stdout stays the JSON document
            typer.echo(elsewhere, err=True)
        return
    table = Table(title=f"Effective configuration ({loaded.path})")
    for column in ("field", "value", "source"):
        table.add_column(column, overflow="fold", no_wrap=column == "field")  # a name is never cut
    for row in rows:
        table.add_row(row.field, shown(row.field, row.value), row.source)
    longest = max((len(r.field) + len(shown(r.field, r.value)) + len(r.source) for r in rows), default=0)
    console = table_console(longest + 10)
    console.print(table)
    if note:
        console.print(note, style="dim")
    if elsewhere:
        console.print(elsewhere, markup=False, highlight=False)


def _program_config(home: KlawHome) -> str:
    """The line saying that the engine running on `home` does not use this table's values: a program
    gave `Klaw` its own config (the home's lock says so, listening or not; decision 456); else ""."""
    from klaw.home_lock import PROGRAM_CONFIG, holder_of

    holder = holder_of(home.root)
    if holder is None or holder.config != PROGRAM_CONFIG:
        return ""
    return (
        f"Note: {holder.describe()} is running on {home.root} with the configuration it gave Klaw(config=...),"
        " not these values: they are what a klaw command, or an engine started without config=, uses."
    )


async def _command_overrides(home: KlawHome, config: EngineConfig) -> tuple[dict[str, ConfigOverride], str]:
    """What `/rag set`, `/summarizer`, `/embeddings` stored in klaw.db's settings (none before the
    engine first ran); a database that cannot be opened leaves them out with a note saying so."""
    from klaw.config_view import ConfigOverride
    from klaw.engine.memory_settings import MemorySettings
    from klaw.store.backend import open_storage
    from klaw.store.protocol import StorageError

    path = home.database_file(config.database.path)
    if not path.exists():
        return {}, ""
    try:
        store = await open_storage(path, config.database)
    except StorageError as exc:
        return {}, f"settings changed by chat commands are not shown: {exc}"
    try:
        settings = await MemorySettings(config.summarizer, config.embedder, config.rag, store.settings).load()
        return {field: ConfigOverride(value, command) for field, value, command in settings.overrides()}, ""
    finally:
        await store.aclose()


@app.command()
def path() -> None:
    """Print the path of engine.yaml."""
    typer.echo(str(home_from_env(must_exist=False).config_file))


@app.command()
def check() -> None:
    """Validate engine.yaml (exit 2 with the reason when it is invalid, 1 when there is none or when the
    engine would not start in this installation: the home is read-only (or not yours to write), the
    configured embedder's package is missing, the home's vectors come from another embedder (run klaw
    reindex), the PostgreSQL database cannot be reached or set up (tried, never changed), a routed model's
    apiKeyEnv variable is not set, or a tool group tools.enabled names fails to load, as `klaw tools` says).
    A valid file changed since the engine running on this home started is said to need a restart."""
    home = home_from_env(must_exist=False)  # a missing home is a missing engine.yaml: said below, exit 1
    if not home.config_file.exists():
        fail(
            f"no engine.yaml at {home.config_file} ({home_source()}; klaw would run on its built-in defaults)."
            " Check KLAW_HOME, or run 'klaw init' to write one.",
            code=1,
        )
    loaded = load_or_exit(home)
    from klaw.cli.database_overrides import database_overrides

    for overridden in database_overrides(home.config_file, home.root):  # before a refusal they explain (decision 486)
        stderr_console(highlight=False).print(overridden)
    db_file = home.database_file(loaded.config.database.path)
    if (stuck := unwritable(home.root, (db_file.parent, db_file))) is not None:
        # Not "valid": every engine start and every chat fails on this home (decision 320's words).
        fail(f"{loaded.path} is valid, but klaw cannot run on this home: {stuck}", code=1)
    from klaw.memory.embedder.factory import embedder_problem  # loads numpy: only for check

    if (missing := embedder_problem(loaded.config.embedder)) is not None:
        # Not "valid": klaw chat, engine and serve refuse to start with this very sentence.
        fail(f"{loaded.path} is valid, but the engine will not start in this installation: {missing}", code=1)
    if (switched := asyncio.run(_stored_vectors_refused(home, loaded.config))) is not None:
        # Not "valid": the engine refuses to start on this home with this very sentence (one rule, one wording).
        fail(f"{loaded.path} is valid, but the engine will not start on this home: {switched}", code=1)
    database = loaded.config.database
    in_service = names_in(home.root / SERVICE_ENV)
    # Set only in service.env: the service has it (decision 227), this shell cannot try it; a warning below.
    url_for_service = (
        bool(database.url_env) and not os.environ.get(database.url_env or "") and (database.url_env in in_service)
    )
    if database.backend == "postgres" and not url_for_service:
        from klaw.store.backend import start_problem

        if (unready := asyncio.run(start_problem(database))) is not None:
            # Not "valid": the engine's start meets the same (a server out of reach may be back later).
            fail(f"{loaded.path} is valid, but the engine will not start on its database: {unready}", code=1)
    unkeyed, service_only = _routed_models_without_key(home, loaded.config)
    if unkeyed is not None:
        # Not "valid" either: klaw chat refuses with this sentence, and every turn would fail with it.
        fail(f"{loaded.path} is valid, but its model cannot be called from here: {unkeyed}", code=1)
    telegram = loaded.config.channels.telegram
    untokened = telegram_token_problem(telegram.enabled, telegram.token_env)
    if untokened is not None and telegram.token_env not in in_service:
        # Not "valid": klaw serve and klaw gateway refuse with this sentence (service.env counts, as for apiKeyEnv).
        fail(f"{loaded.path} is valid, but klaw serve will not start from here: {untokened}", code=1)
    rows, unlisted = _tool_inventory(home, loaded.config)
    if (failed := _groups_failed(rows)) is not None:
        # Not "valid": the agent would go without these groups, and `klaw tools` exits 1 for them.
        fail(f"{loaded.path} is valid, but {failed}", code=1)
    if (cramped := _budget_too_small(home, loaded.config)) is not None:
        fail(f"{loaded.path}: {cramped}")  # exit 2: the file sets what no turn can work in (decision 500)
    typer.echo(f"{loaded.path}: valid")
    warn = stderr_console(highlight=False).print
    if untokened is not None:
        warn(
            f"warning: {telegram.token_env} (channels.telegram.tokenEnv) is set only in {home.root / SERVICE_ENV},"
            " for the service: klaw serve from this shell refuses to start until it is exported here too"
        )
    for name in service_only:
        # The service's own file holds it (decision 227): valid for the service, not for this shell.
        warn(
            f"warning: {name} (a routed model's apiKeyEnv) is set only in {home.root / SERVICE_ENV}, for the"
            f" service: klaw chat from this shell cannot call the model until it is exported here too"
        )
    if database.backend == "postgres" and url_for_service:
        warn(
            f"warning: {database.url_env} (database.urlEnv) is set only in {home.root / SERVICE_ENV}, for the"
            " service: klaw engine, serve and chat from this shell will not start until it is exported here too"
        )
    if (unasked := _host_exec_unasked(loaded.config)) is not None:
        warn(unasked)
    for line in [unlisted] if unlisted is not None else _approval_warnings(loaded.config, rows):
        warn(line)
    for line in _skill_problems(home, loaded.config):
        warn(line)
    from klaw.engine.system_prompt import left_out
    from klaw.tools.web.addresses import metadata_warnings  # here: not for `klaw --help` (test_cli_startup)

    for line in metadata_warnings(loaded.config.web.fetch.allowed_networks()):  # decision 523
        warn(f"warning: {line}")
    for line in left_out(home.workspace):  # every turn goes without it (decision 503)
        warn(f"warning: {line}")
    if (linked := _code_refused(home, loaded.config)) is not None:
        warn(linked)
    if (unheard := telegram.refuses_everyone()) is not None:
        warn(f"warning: {unheard}")
    from klaw.cli.task_targets import task_target_warnings

    for line in task_target_warnings(home, loaded.config):  # as stored: no rich markup or :emoji: read (510)
        typer.echo(line, err=True)
    from klaw.config_history import upgrade_notes

    for note in upgrade_notes(loaded):  # what an older `klaw init` pinned: said, never rewritten (decision 476)
        warn(note)
    if (behind := asyncio.run(_running_engine_behind(home))) is not None:
        warn(behind)


async def _running_engine_behind(home: KlawHome) -> str | None:
    """The warning when an engine runs on `home` with engine.yaml as it was when it started, the file having
    changed since (its `config_file` query): "valid" alone let newcomer18 think an edit was in force, and the
    same refusal came back (decision 464). None when none runs, the file is as it read it, or it cannot say
    (an engine older than the query, one that does not answer: `klaw tools` and `/status` say more)."""
    from klaw.engine.frames import QueryFrame
    from klaw.engine.one_query import EngineRefused, ask
    from klaw.engine_presence import engine_answers, home_holder

    if not await engine_answers(home.socket_path):
        return None
    try:
        frame = await ask(home.socket_path, QueryFrame(id="config-1", query="config_file", params={}), 10.0)
    except (OSError, EOFError, TimeoutError, ValueError, EngineRefused):
        return None
    said = frame.data.get("changed") if frame.error is None and isinstance(frame.data, dict) else None
    if not isinstance(said, str):
        return None
    holder = await home_holder(home)
    who = holder.describe() if holder is not None else "an engine"
    return f"warning: {said} ({who} runs on {home.root} with the file as it was; the checks above are of the file now)"


async def _stored_vectors_refused(home: KlawHome, config: EngineConfig) -> str | None:
    """The engine's refusal when the home's message vectors come from another embedder than engine.yaml
    now configures (its model or backend switched without `klaw reindex`), in its words (store/protocol.py's
    `embedder_mismatch`), or None. Only a SQLite home is looked at (a PostgreSQL server may be out of
    reach from here); a database not made yet holds no vectors."""
    from klaw.memory.embedder.factory import create_embedder
    from klaw.store.backend import open_storage
    from klaw.store.protocol import StorageError, embedder_mismatch

    path = home.database_file(config.database.path)
    if config.database.backend != "sqlite" or not path.exists():
        return None
    try:
        embedder = create_embedder(config.embedder, cache_dir=home.embedder_cache)  # local models load lazily
    except Exception:  # a problem building it is the embedder check's, said before this one
        return None
    configured = (embedder.model_id, embedder.dim)
    await embedder.aclose()
    try:
        store = await open_storage(path, config.database)
    except StorageError as exc:  # the engine's start meets the same
        return str(exc)
    try:
        bound, stored = await store.vectors.bound_embedder(), await store.vectors.count()
    finally:
        await store.aclose()
    table = bound.name if bound is not None else ""
    mismatch = embedder_mismatch(table, stored, (bound.embedder_id, bound.dim) if bound else None, configured)
    return None if mismatch is None else str(mismatch)


def _routed_models_without_key(home: KlawHome, config: EngineConfig) -> tuple[str | None, list[str]]:
    """The problem `klaw chat`'s start-up check finds first with a routed model's API key (its
    `apiKeyEnv` variable not set in this shell), in the same words, or None; and the variables not set
    here that `KLAW_HOME/service.env` sets (the service has them: a warning, not a failure)."""
    from klaw.llm.endpoint import key_problem  # not preflight: no httpx for a check that makes no call

    routing = config.routing
    service = names_in(home.root / SERVICE_ENV)
    service_only: list[str] = []
    for model_id in dict.fromkeys((routing.default, routing.summarization_model, routing.subagent_model)):
        model = config.model(model_id)
        if (problem := key_problem(model, model_id)) is None:
            continue
        if model.api_key_env is None or model.api_key_env not in service:
            return problem, service_only
        if model.api_key_env not in service_only:
            service_only.append(model.api_key_env)
    return None, service_only


def _tool_inventory(home: KlawHome, config: EngineConfig) -> tuple[list[ToolRow], str | None]:
    """The tools as `klaw tools` lists them without an engine (no MCP server started), or why they were not."""
    from klaw.engine.tool_listing import listing_without_engine  # the tools and their groups: only for check
    from klaw.store.records import ChatRef

    try:
        chat, in_service = ChatRef("console", "check"), frozenset(names_in(home.root / SERVICE_ENV))
        inventory = listing_without_engine(home, config, chat, config.routing.default, in_service)
    except Exception as exc:
        return [], f"warning: the tools were not checked ({type(exc).__name__}: {exc})"
    return inventory.rows, None


def _budget_too_small(home: KlawHome, config: EngineConfig) -> str | None:
    """Each chat model whose contextBudget leaves no room for a message once the system prompt and its tools
    are placed (engine/budget_room.py), in one sentence each; None when every one has room."""
    import logging

    from klaw.engine.budget_room import too_small
    from klaw.engine.tool_assembly import skill_catalogue
    from klaw.engine.tool_listing import ROW_LOGGERS, selection_without_engine
    from klaw.log_format import held_back
    from klaw.tools.docs.tools import DOCS_PROMPT

    try:
        with held_back(
            *ROW_LOGGERS, "klaw.engine.system_prompt", level=logging.CRITICAL
        ):  # the rows said them: not twice
            selection = selection_without_engine(home, config, skill_catalogue(home, config, logged=False))
        appendix = DOCS_PROMPT if "docs" in config.tool_groups else None
        found = too_small(home.workspace, config, selection.specs, appendix)
    except Exception:  # the tools that cannot be built were said above; the turn tells the chat
        return None
    return "; ".join(each.words() for each in found) + "." if found else None


def _groups_failed(rows: list[ToolRow]) -> str | None:
    """The tool groups `tools.enabled` names that fail to load (a plugin that raises, a name another group
    has): the engine starts without them, but `klaw tools` exits 1 for them, and so does the check."""
    from klaw.tools.inventory import SKILL_SOURCE

    failed = [row for row in rows if row.state == "failed" and row.source != SKILL_SOURCE]
    if not failed:
        return None
    said = "; ".join(f"tool group {row.name!r} fails to load: {row.reason} (fix: {row.fix})" for row in failed)
    return f"{said}. `klaw tools` lists what the agent is offered and what failed"


def _approval_warnings(config: EngineConfig, rows: list[ToolRow]) -> list[str]:
    """A warning for each `tools.approval` name no tool has, the rows `klaw tools` flags (decision 238):
    valid YAML, yet a misspelt name holds nothing and the tool meant runs unasked; and for a held file_write
    that code_execute's writes pass by (decision 515)."""
    from klaw.config.tools import writes_unheld
    from klaw.tools.inventory import APPROVAL_SOURCE

    unheld = writes_unheld(config.tools.approval, [row.name for row in rows if row.state == "offered"])
    said = [approval_warning(row) for row in rows if row.source == APPROVAL_SOURCE]
    return said + ([f"warning: {unheld}"] if unheld is not None else [])


def _skill_problems(home: KlawHome, config: EngineConfig) -> list[str]:
    """The workspace's broken skills as `klaw skills check` says them: the file stays valid, the skill left out."""
    from klaw.cli.skills_cmd import problem_lines
    from klaw.tools.skills.catalogue import scan_skills

    return problem_lines(scan_skills(home.skills_dir, max_bytes=config.tools.skills.max_file_bytes))


def _code_refused(home: KlawHome, config: EngineConfig) -> str | None:
    """A warning when code_execute will refuse to run: a prompt file or skills/ is a symlink, or odd (286)."""
    if "code" not in config.tool_groups or config.tools.allow_prompt_edits or not home.workspace.is_dir():
        return None
    from klaw.home_init import PROTECTED_WORKSPACE
    from klaw.tools.beneath import open_directory
    from klaw.tools.sandbox.tool import replaceable

    root = open_directory(home.workspace.resolve())
    try:
        found = replaceable(root, PROTECTED_WORKSPACE)
    finally:
        os.close(root)
    if not found:
        return None
    return (
        f"warning: code_execute will not run while, in {home.workspace}, {'; '.join(found)}: code run in the"
        " sandbox could replace it with its own, read into every turn. Put the file or folder itself there in"
        " its place, or set tools.allowPromptEdits: true"
    )


def approval_warning(row: ToolRow) -> str:
    """The warning for a `tools.approval` name no offered tool has (an `APPROVAL_SOURCE` row): `klaw config
    check`'s, and `klaw chat`'s at start. A tool of a group not enabled is said to be that group's."""
    from klaw.tools.inventory import NOT_A_TOOL

    if row.reason != NOT_A_TOOL:
        return f"warning: tools.approval names {row.name}, {row.reason}; {row.fix}"
    return (
        f"warning: tools.approval names {row.name}, but no tool has this name: a misspelt name holds nothing"
        " and the tool meant runs without asking you; use a name `klaw tools` lists"
        " (an MCP server's tool is <server>__<tool>)"
    )


def _host_exec_unasked(config: EngineConfig) -> str | None:
    """A warning when host_exec is offered (hostExec.allow lists commands) but not held for approval:
    valid (a person may choose it, decision 185), yet the model then runs those commands unasked."""
    if not config.host_exec.allow or "host" not in config.tool_groups or "host_exec" in config.tools.approval:
        return None
    return (
        "warning: host_exec runs the commands hostExec.allow lists on this machine without asking you:"
        " tools.approval does not name it (add host_exec to tools.approval to be asked each time)"
    )
