"""`klaw memory forget` while an engine runs: the engine forgets, asked over its socket (the `forget`
query, engine/commands.py), as `klaw tools` and `klaw mcp serve` reach it. It once refused and said to
type `/forget` in "one of its chats", which a chat the target did not belong to answered with "there is
no memory … in this chat"."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console

from klaw.cli.context import fail
from klaw.home import KlawHome
from klaw.memory.forget_targets import ForgetKind
from klaw.memory.forget_words import erased_from, runs_left_sentence, tasks_left_sentence

if TYPE_CHECKING:
    from klaw.config import DatabaseConfig
    from klaw.store.records import ChatRef

PLAN_TIMEOUT_SECONDS = 15.0  # what the target holds: a few reads
FORGET_TIMEOUT_SECONDS = 120.0  # a forget stops the chat's turn and rewrites log files


class _Shown:
    """What the engine's plan says, in the shape `confirm` reads (`ForgetPlan`'s label, chat, describe)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.label = str(data.get("label", ""))
        self.chat = str(data.get("chat", ""))
        self._describe = str(data.get("describe", ""))

    def describe(self) -> str:
        return self._describe


def forget_through_engine(
    home: KlawHome,
    database: DatabaseConfig,
    kind: ForgetKind,
    target_id: int | str,
    owner: ChatRef | None,
    confirm: Callable[[Any], bool],  # reads label, chat and describe(), as of a ForgetPlan
    console: Console,
    label: str | None = None,  # the words naming the target, when the CLI has its own (`segment 1 (id 7)`)
) -> bool:
    """True when an engine answered on the socket and the command is done (forgotten, or not confirmed:
    then exit 1); False when none answers, so the command forgets in this process."""
    from klaw.engine_presence import engine_answers

    if not asyncio.run(engine_answers(home.socket_path)):
        return False
    params: dict[str, Any] = {"kind": kind.value, "id": str(target_id)}
    if owner is not None:
        params |= {"channel": owner.channel, "chat_id": owner.chat_id}
    plan = _ask(home, params, PLAN_TIMEOUT_SECONDS)
    if not confirm(_Shown(plan)):
        console.print("Nothing was forgotten.", highlight=False)
        raise typer.Exit(1)
    channel, _, chat_id = str(plan.get("chat", "")).partition(":")  # its owner's: the plan shown is the one done
    done = _ask(home, {**params, "channel": channel, "chat_id": chat_id, "confirm": True}, FORGET_TIMEOUT_SECONDS)
    stopped = "Stopped the chat's turn under way, then forgot" if done.get("stopped") else "Forgot"
    console.print(
        f"{stopped} {label or done.get('label')} through the engine running on {home.root}:"
        f" {erased_from(database, int(done.get('files_rewritten') or 0))}. A tombstone in the log keeps"
        " `klaw reindex` from bringing it back."
        + tasks_left_sentence([str(name) for name in done.get("tasks") or []])
        + runs_left_sentence([str(name) for name in done.get("runs") or []])
        + str(done.get("copy") or ""),
        highlight=False,
    )
    return True


_ids = itertools.count(1)


def _ask(home: KlawHome, params: dict[str, Any], timeout_seconds: float) -> dict[str, Any]:
    """One `forget` query on a connection of its own; a refusal (unknown id, another chat's) exits 1."""
    from klaw.engine.frames import QueryFrame
    from klaw.engine.one_query import EngineRefused, ask

    async def forget() -> tuple[str | None, Any]:
        query = QueryFrame(id=f"forget-{next(_ids)}", query="forget", params=params)
        frame = await ask(home.socket_path, query, timeout_seconds)
        return frame.error, frame.data

    try:
        error, data = asyncio.run(forget())
    except EngineRefused as exc:
        fail(f"the engine running on {home.root} refused the connection: {exc}", code=1)
    except (OSError, EOFError, TimeoutError) as exc:
        fail(
            f"an engine is running on {home.root} but did not answer on {home.socket_path}"
            f" ({type(exc).__name__}); try again, or type `/forget {params['kind']} {params['id']}` in the chat"
            " it belongs to (klaw memory list shows which)",
            code=1,
        )
    if error is not None:
        if error.startswith("unknown query"):  # an engine older than this command
            fail(f"the engine running on {home.root} cannot forget over its socket: restart it, or stop it and retry")
        fail(f"cannot forget: {error}", code=1)
    return data if isinstance(data, dict) else {}
