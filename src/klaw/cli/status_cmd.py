"""`klaw status`: is an engine running on this home, and how is it doing (decision 510)?

What it prints is read where klaw already keeps it, never worked out again: who holds the home (its lock,
`engine_presence`), the engine's own /status lines over its socket (the `status` query: uptime, queue depth,
LLM slots, embedding queue, scheduled tasks, what failed), the web page's address (`served_page`), the
messages the gateway holds for an engine that is down (`gateway/buffer`), the store's counts (`klaw db
info`'s), and what the scheduled tasks' last runs met (`klaw schedule list`'s). Exit 0 when an engine runs,
3 when none does (as `systemctl status` says "not running"), so a script can ask.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from klaw.cli.context import home_from_env, load_or_exit

if TYPE_CHECKING:
    from klaw.config import EngineConfig
    from klaw.home import KlawHome

NOT_RUNNING = 3
QUERY_TIMEOUT_SECONDS = 10.0


def status(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print JSON: running, holder, pid, lines, stored, ….")
    ] = False,
) -> None:
    """Whether an engine runs on this home (who, its pid, its uptime), its /status lines (queue depth, LLM
    slots, embedding queue, scheduled tasks, what failed), the web address, messages waiting for it, the
    stored chats and messages, and scheduled tasks' last warnings; exit 3 when no engine runs."""
    home = home_from_env()
    config = load_or_exit(home).config
    found = asyncio.run(_gather(home, config))
    if as_json:
        typer.echo(json.dumps(found, indent=2))
    else:
        typer.echo("\n".join(_lines(home, found)))
    if not found["running"]:
        raise typer.Exit(NOT_RUNNING)


async def _gather(home: KlawHome, config: EngineConfig) -> dict[str, Any]:
    from klaw.engine_presence import engine_answers, home_holder
    from klaw.gateway.buffer import pending_in
    from klaw.home_lock import ENGINE_ROLE
    from klaw.served_page import served_page

    holder = await home_holder(home)
    answers = await engine_answers(home.socket_path)
    found: dict[str, Any] = {
        "home": str(home.root),
        "running": answers or (holder is not None and holder.role in ("", ENGINE_ROLE)),
        "holder": holder.describe() if holder is not None else None,
        "socket": str(home.socket_path) if answers else None,
        "web": await served_page(home),
        "gateway_waiting": await asyncio.to_thread(pending_in, home.gateway_dir),
    }
    if answers:
        found.update(await _ask(home))
    found["stored"] = await _stored(home, config)
    found["tasks"] = await asyncio.to_thread(_task_notes, home)
    return found


async def _ask(home: KlawHome) -> dict[str, Any]:
    """The engine's own words: its pid, start and /status lines; why not, from an engine that cannot say."""
    from klaw.engine.frames import QueryFrame
    from klaw.engine.one_query import EngineRefused, ask

    try:
        frame = await ask(home.socket_path, QueryFrame(id="status-1", query="status"), QUERY_TIMEOUT_SECONDS)
    except (OSError, EOFError, TimeoutError, ValueError, EngineRefused) as exc:
        return {"unanswered": f"its socket did not answer ({str(exc) or type(exc).__name__})"}
    data = frame.data if isinstance(frame.data, dict) else {}
    if frame.error is not None or not isinstance(data.get("lines"), list):
        return {"unanswered": f"it did not say its status ({frame.error or 'no lines'}: a klaw older than this one?)"}
    return {"pid": data.get("pid"), "started_at": data.get("started_at"), "lines": [str(x) for x in data["lines"]]}


async def _stored(home: KlawHome, config: EngineConfig) -> dict[str, int] | str:
    """`klaw db info`'s counts that say how much the agent holds, or why they cannot be read now."""
    from klaw.store.backend import open_storage
    from klaw.store.protocol import StorageError, StoreNotSetUp

    try:
        store = await open_storage(home.database_file(config.database.path), config.database)
    except StoreNotSetUp:
        return "nothing stored yet"
    except (StorageError, OSError) as exc:
        return f"cannot be read now ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
    try:
        counts = await store.counts()
    finally:
        await store.aclose()
    return {
        "chats": counts.chats,
        "messages": counts.messages,
        "embeddings_pending": counts.embedding_pending,
        "embeddings_failed": counts.embedding_failed,
    }


def _task_notes(home: KlawHome) -> dict[str, str]:
    """What each scheduled task's last run met (its replies reach nobody, its model refused), as
    `klaw schedule list` says it."""
    from klaw.scheduling.task_store import ScheduleStore

    return ScheduleStore(home.scheduler_db).last_notes() if home.scheduler_db.exists() else {}


def _lines(home: KlawHome, found: dict[str, Any]) -> list[str]:
    from klaw.terminal_text import one_line

    where, who = home.root, found["holder"]
    if found["socket"] is not None:
        pid = f"pid {found['pid']}, " if found.get("pid") and f"pid {found['pid']}" not in (who or "") else ""
        since = f", running since {found['started_at']}" if found.get("started_at") else ""
        lines = [f"An engine is running on {where}: {who or 'an engine'} ({pid}socket {found['socket']}{since})."]
    elif found["running"]:
        lines = [f"An engine is running on {where}: {who}, without a socket to ask (a program's, listen=False)."]
    elif who is not None:
        lines = [f"No engine is running on {where}; {who} holds it for its run."]
    else:
        lines = [f"No engine is running on {where}: `klaw serve` starts one (`klaw service install` keeps it running)."]
    if found.get("unanswered"):
        lines.append(f"The engine's status: {found['unanswered']}.")
    lines += found.get("lines", [])
    if found["web"]:
        lines.append(f"Web page: {found['web']}")
    if found["gateway_waiting"]:
        lines.append(f"Waiting in the gateway's buffer for the engine: {found['gateway_waiting']} message(s)")
    stored = found["stored"]
    if isinstance(stored, dict):
        lines.append(
            f"Stored: {stored['chats']} chat(s), {stored['messages']} message(s); embeddings"
            f" {stored['embeddings_pending']} pending, {stored['embeddings_failed']} failed (`klaw db info` says more)"
        )
    else:
        lines.append(f"Stored: {stored}")
    for task, note in sorted(found["tasks"].items()):
        lines.append(f"Last run of task {task}: {note}")
    return [one_line(line) for line in lines]
