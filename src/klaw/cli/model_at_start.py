"""The model check `klaw chat` refuses on, made a one-line warning for `klaw serve` and `klaw engine`:
a service's model may come up after it (a container beside Ollama), so those start anyway, but a person
reading the start's output or the journal learns at once that chats wait for it, instead of from the
first message's "could not reach the server after 4 attempt(s)"."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from klaw.config_loader import LoadedConfig


def set_where(loaded: LoadedConfig) -> str:
    """Where routing.default came from, for the model check's message: a KLAW__ override or the file."""
    source = loaded.sources.get("routing.default", "")
    return f"by {source.removeprefix('env ')}" if source.startswith("env ") else f"in {loaded.path}"


async def model_warning(loaded: LoadedConfig, command: str) -> str | None:
    """None when routing.default's server answers; else one line: what `klaw chat` would have refused
    with (its first paragraph, without the Ollama example), and that `command` goes on; or the doubt
    `klaw chat` says and goes on from (a 404 page at /models, decision 416)."""
    from klaw.llm.preflight import model_check

    model_id = loaded.config.routing.default
    check = await model_check(loaded.config.model(model_id), model_id, set_where=set_where(loaded))
    if check.refusal is None:
        return None if check.doubt is None else f"warning: {check.doubt} {command} goes on."
    said = " ".join(check.refusal.split("\n\n", 1)[0].split())
    said = said[:1].lower() + said[1:]  # "warning: no model server answered …"
    return f"warning: {said} {command} goes on: chats are answered once the model answers."


def check_in_background(loaded: LoadedConfig, command: str) -> asyncio.Task[str | None]:
    """Start the check beside the start (it may wait up to the check's 5 s); its warning is printed by
    `say_check` once the whole start succeeded: a start refused after it (a port in use) says only that."""
    return asyncio.get_running_loop().create_task(model_warning(loaded, command), name="model check at start")


async def say_check(checking: asyncio.Task[str | None], console: Console, stop: asyncio.Event) -> None:
    """Print the check's warning, if any, on `console` (waiting for its answer, or for `stop`: Ctrl-C or
    SIGTERM during a slow check stops at once, the check dropped). Its reader may be gone by then
    (`klaw serve 2>&1 | tee log` after Ctrl-C): a failed print never ends klaw (rich exits 1 on it)."""
    from klaw.cli.context import say_while_stopping

    stopped = asyncio.get_running_loop().create_task(stop.wait(), name="stop during model check")
    try:
        await asyncio.wait({checking, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
    if not checking.done():
        checking.cancel()
        return
    warning = checking.result()
    if warning is not None:
        say_while_stopping(console, warning)


@contextmanager
def cancelled_on_failure(checking: asyncio.Task[str | None]) -> Iterator[None]:
    """The check is dropped, unprinted, when the start fails: its refusal is the news."""
    try:
        yield
    except BaseException:
        checking.cancel()
        raise
