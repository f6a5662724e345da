"""One configured MCP server kept connected: started, watched, restarted with backoff, called.

The SDK's client enters anyio task groups, whose contexts must be entered and exited in the same
task, so each connection lives whole inside one task of its own (`_connection`): it opens the
transport, lists the tools, says it is ready, and waits until it is told to stop or the link is
found broken, then closes in that same task. A supervisor task around it times the start, probes an
idle server, and after any failure (no start, a crash, a hang) waits 1 s, 2 s, 4 s … 5 min on the
engine's clock before the next start; a connection that served resets the delay. The wait counts from
the moment the failure was found, on the clock's monotonic timeline, not from the end of the teardown
that follows (a hung process takes seconds to be stopped): the retry comes when /status said it would,
and a clock moved on meanwhile does not push it a whole backoff further (decision 495).

A call never raises anything but `ToolRefusal`: a server that is down, dies mid-call or does not
answer in `timeoutSeconds` gives the model a sentence saying so, and the turn goes on.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED, Implementation, Tool

from klaw.cancellation import cancel_and_wait
from klaw.config import McpServerConfig
from klaw.tools.calls import ToolRefusal
from klaw.tools.mcp.call_watch import exit_words, race
from klaw.tools.mcp.overflow import Overflow
from klaw.tools.mcp.results import describe, result_text
from klaw.tools.mcp.server_log import last_words, said_since_start
from klaw.tools.mcp.servers import server_address
from klaw.tools.mcp.tool_pages import list_all_tools
from klaw.tools.mcp.transport import (
    HttpRefusal,
    log_path,
    missing_path,
    open_transport,
    refusal_reason,
    start_mistake,
)

log = logging.getLogger(__name__)

BACKOFF_FIRST_SECONDS = 1.0
BACKOFF_MAX_SECONDS = 300.0
PROBE_TIMEOUT_SECONDS = 10.0
PROBE_MIN_SECONDS = 2.0  # a busy machine may take a moment to answer even a tool list
CLIENT_INFO = Implementation(name="klaw", version="0.1.0")

Phase = Literal["starting", "ready", "unavailable", "stopped"]
SILENT_WHY = "npx or uvx may still be downloading its package, or find no network, no Node or no Python"


@dataclass(frozen=True)
class LinkStatus:
    phase: Phase
    reason: str | None  # why it is unavailable
    retry_at: datetime | None
    failures: int  # failed starts or broken links since the last one that served
    final: bool = False  # engine.yaml's mistake (no such program): not retried until klaw restarts
    silent: bool = False  # its last start timed out with not a word on stderr, and it never served in this run


class ServerLink:
    def __init__(
        self,
        name: str,
        config: McpServerConfig,
        *,
        now: Callable[[], datetime],
        sleep: Callable[[float], Awaitable[None]],
        monotonic: Callable[[], float],
        workspace: Path,
        log_dir: Path,
        check_interval_seconds: float,
        on_tools: Callable[[Sequence[Tool]], None],
    ) -> None:
        self.name = name
        self.config = config
        self._now = now
        self._sleep = sleep
        self._monotonic = monotonic  # the timeline `sleep` runs on: backoffs are measured on it
        self._workspace = workspace
        self._log_dir = log_dir
        self._check_interval = check_interval_seconds
        self._on_tools = on_tools
        self._client: Client | None = None
        self._overflow = Overflow()  # the connection's: a message past the cap ended it (decisions 298, 309)
        self._phase: Phase = "starting"
        self._reason: str | None = None
        self._reason_warned: str | None = None  # the reason last logged as a warning (said once per reason)
        self._retry_at: datetime | None = None
        self._failed_at = 0.0  # on `monotonic`: when the last start failed or the link was found broken
        self._failures = 0
        self._final = False
        self._silent = False
        self._served = False  # it was ready once in this engine's run: a timeout now means slow, not broken
        self._exited = asyncio.Event()  # the connection's process ended (stdio_lines.py tells it)
        self._exit_status: int | None = None
        self._calls = 0  # calls waiting for an answer now
        self._start_failed = asyncio.Event()  # the latest start ended without the server ready
        self._broken = asyncio.Event()
        self._stopping = asyncio.Event()
        self.settled = asyncio.Event()  # the first start ended, ready or failed
        self.ready = asyncio.Event()  # set while the server is ready
        self.down = asyncio.Event()  # set while it is unavailable (waiting for its next start)
        self._task: asyncio.Task[None] | None = None
        self._checks: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._supervise(), name=f"mcp-{self.name}")

    async def aclose(self) -> None:
        self._stopping.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        self._phase = "stopped"

    def status(self) -> LinkStatus:
        return LinkStatus(self._phase, self._reason, self._retry_at, self._failures, self._final, self._silent)

    async def call(self, tool: str, arguments: dict[str, Any]) -> str:
        """The tool's result text; ToolRefusal with a sentence for the model on any failure."""
        client = self._client
        if client is None or self._phase != "ready":
            client = await self._restarted()
        timeout = self.config.timeout_seconds
        self._calls += 1  # a process exit meanwhile is worded by the calls ("during a call"), not by the watcher
        try:
            async with asyncio.timeout(timeout):
                result, gone = await race(
                    client, tool, arguments, self._exited, self._probe_bound(), lambda: self._exit_status
                )
        except TimeoutError:
            log.warning("MCP server %r: %s did not answer within %gs", self.name, tool, timeout)
            check = asyncio.create_task(self._check_alive())  # a hung server is restarted
            self._checks.add(check)
            check.add_done_callback(self._checks.discard)
            raise ToolRefusal(
                f"the MCP server {self.name!r} did not answer {tool} within {timeout:g} seconds; the call was"
                " abandoned (it may still have acted)"
            ) from None
        except Exception as exc:
            if self._overflow.happened:
                self._mark_broken(f"it {self._overflow.words()}")
                raise ToolRefusal(
                    f"the MCP server {self.name!r} {self._overflow.words()} during the call to {tool}, which did"
                    f" not complete; {self._restarting()}"
                ) from None
            if isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED:
                result, gone = None, ("stopped", exit_words(self._exit_status))
            elif isinstance(exc, MCPError):
                raise ToolRefusal(f"the MCP server {self.name!r} refused the call to {tool}: {exc.message}") from None
            else:
                self._mark_broken(reason := describe(exc))
                raise ToolRefusal(f"the MCP server {self.name!r} failed during the call to {tool} ({reason})") from None
        finally:
            self._calls -= 1
        if result is None:  # gone mid-call: worded so, whether its exit or its closed pipe was seen first
            did, detail = gone or ("stopped", "")
            self._mark_broken(f"it {did} during a call{self._log_hint()}")  # /status: the detail is the model's
            raise ToolRefusal(
                f"the MCP server {self.name!r} {did} during the call to {tool}{detail}, which did not complete;"
                " klaw is restarting it"
            )
        if not self._calls and self._exited.is_set():  # it answered, then ended as the call finished (521)
            self._mark_broken(f"it stopped{exit_words(self._exit_status)}{self._log_hint()}")
        text = result_text(result)
        if result.is_error:
            raise ToolRefusal(text)
        return text

    async def _restarted(self) -> Client:
        """A server that served and is being restarted: the call waits for it (at most `timeoutSeconds`, engine's
        clock), not refused with "klaw retries in 0 s" (decision 514). Refused at once: never ready yet, its
        restart failed, its retry further off, engine.yaml's mistake."""
        bound = self.config.timeout_seconds
        soon = self._retry_at is None or (self._retry_at - self._now()).total_seconds() <= bound
        if not self._served or self._final or self._stopping.is_set() or self._start_failed.is_set() or not soon:
            raise ToolRefusal(self.unavailable())
        log.info("MCP server %r: a call waits for its restart (at most %gs)", self.name, bound)
        await self._wait(self.ready.wait(), self._start_failed.wait(), self._sleep(bound))
        if self._client is not None and self._phase == "ready":
            return self._client
        waited = "" if self._start_failed.is_set() else f"; klaw waited {bound:g} s for it to start again"
        raise ToolRefusal(self.unavailable() + waited)

    def unavailable(self) -> str:
        """Why a call cannot be made now, for the model: still starting, or down and when klaw retries."""
        if self._phase == "starting":
            return f"the MCP server {self.name!r} is still starting; try again shortly"
        retry = ""
        if self._retry_at is not None:
            seconds = max(0, round((self._retry_at - self._now()).total_seconds()))
            retry = f"; klaw retries in {seconds} s" if seconds > 0 else "; klaw is retrying now"
        return f"the MCP server {self.name!r} is unavailable ({self._reason}){retry}"

    def _log_hint(self) -> str:
        """Where a command server's last words are, or which address a URL server has (newcomer14: "ConnectError:
        All connection attempts failed" named no address), for the person reading why it stopped."""
        if self.config.command is None:
            return f" (at {server_address(self.config)})"
        return f" (its error output: {log_path(self._log_dir, self.name)})"

    def _last_words(self, served: bool) -> str:
        """A command server's last line of error output, quoted, when it failed to start (its output copied
        by now: the connection's stack closed); "" otherwise, and for a URL server (decision 501)."""
        if served or self.config.command is None:
            return ""
        words = last_words(self._log_dir, self.name, [os.environ.get(variable) for variable in self.config.env])
        return "" if words is None else f"; it said: {words}"

    def _restarting(self) -> str:
        """What klaw does about a server that passed the cap: a command is stopped, a URL's session ended."""
        url = self.config.command is None
        return "klaw ended its session and is starting a new one" if url else "klaw stopped it and is restarting it"

    def _overflowed(self) -> None:
        """A URL server's answer passed the cap, maybe one nobody waits for: its session ends now (decision 309)."""
        self._mark_broken(f"it {self._overflow.words()}")

    def _process_exited(self, status: int | None) -> None:
        """The command's process ended (stdio_lines.py): a call waiting ends now, and so does the link."""
        self._exit_status = status
        self._exited.set()  # a waiting call ends, and words the link's end itself ("during a call")
        if not self._calls:
            self._mark_broken(f"it stopped{exit_words(status)}{self._log_hint()}")

    def _mark_broken(self, reason: str) -> None:
        if self._phase == "ready":
            self._reason = reason
            self._broken.set()

    def _probe_bound(self) -> float:
        return min(PROBE_TIMEOUT_SECONDS, max(PROBE_MIN_SECONDS, self.config.timeout_seconds))

    async def _check_alive(self) -> None:
        """Ask for the tool list (the 2026-07-28 protocol has no ping): any answer, even an error, means
        the server lives; none within the time means it hangs or died, and it is restarted."""
        client = self._client
        if client is None:
            return
        try:
            async with asyncio.timeout(self._probe_bound()):
                await client.list_tools(cache_mode="refresh")
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                self._mark_broken(
                    f"it {self._overflow.words()}" if self._overflow.happened else f"it stopped{self._log_hint()}"
                )
        except Exception as exc:
            self._mark_broken(f"it stopped answering ({describe(exc)})")

    async def _supervise(self) -> None:
        if (missing := start_mistake(self.name, self.config, self._workspace)) is not None:
            # engine.yaml's mistake: said once, never retried (a retry finds the same), no process, no log line
            self._phase, self._reason, self._failures, self._final = (
                "unavailable",
                f"it cannot start: {missing}",
                1,
                True,
            )
            self.settled.set()
            self.down.set()
            log.warning("MCP server %r cannot start: %s; fix it, then restart klaw", self.name, missing)
            return
        delay = BACKOFF_FIRST_SECONDS
        while not self._stopping.is_set():
            served = await self._run_once()
            self.settled.set()
            if self._stopping.is_set():
                return
            if served:
                delay, self._failures, self._reason_warned = BACKOFF_FIRST_SECONDS, 0, None
            self._failures += 1
            self._phase = "unavailable"
            left = max(0.0, delay - (self._monotonic() - self._failed_at))  # the teardown's time counts
            self._retry_at = self._now() + timedelta(seconds=left)
            self.down.set()
            # Said once per reason: `klaw chat` prints warnings into the person's terminal, and a server that
            # cannot start would otherwise repeat the same line at every retry for the whole session (/status
            # shows the state at any time).
            level = logging.INFO if self._reason == self._reason_warned else logging.WARNING
            self._reason_warned = self._reason
            when = f"retrying in {left:.0f}s" if left >= 0.5 else "retrying now"  # its stop took the backoff
            log.log(level, "MCP server %r is unavailable (%s); %s", self.name, self._reason, when)
            await self._wait(self._sleep(left))
            delay = min(delay * 2, BACKOFF_MAX_SECONDS)
            self._retry_at = None
            self._phase = "starting"
            self.down.clear()

    async def _run_once(self) -> bool:
        """One connection from start to end; True when it became ready (it served)."""
        ready = asyncio.Event()
        self._broken.clear()
        self._start_failed.clear()
        connection = asyncio.create_task(self._connection(ready), name=f"mcp-{self.name}-link")
        timed_out: str | None = None  # the reason a start past its timeout gets
        try:
            async with asyncio.timeout(self.config.start_timeout_seconds):
                await self._first(ready.wait(), asyncio.shield(connection), self._stopping.wait())
        except TimeoutError:
            timed_out = self._reason = f"it did not start within {self.config.start_timeout_seconds:g} seconds"
        if not ready.is_set():
            self._failed_at = self._monotonic()
            connection.cancel()
            await asyncio.gather(connection, return_exceptions=True)  # its output copied into its log
            self._silent = (
                timed_out is not None
                and self._reason == timed_out  # not replaced by what the cancelled connection said
                and not self._served
                and self.config.command is not None
                and not said_since_start(self._log_dir, self.name)
            )
            if self._silent:
                self._reason = f"{self._reason} and printed nothing ({SILENT_WHY})"
            self._start_failed.set()
            return False
        self._phase, self._served, self._silent = "ready", True, False
        self._reason = None
        self.settled.set()
        self.ready.set()
        log.info("MCP server %r is ready", self.name)
        while not connection.done() and not self._stopping.is_set():
            await self._wait(self._sleep(self._check_interval), self._broken.wait(), asyncio.shield(connection))
            if not self._broken.is_set() and not self._stopping.is_set() and not connection.done():
                await self._check_alive()
            if self._broken.is_set():
                break
        # Unavailable from this moment, with the retry time _supervise will set (a server that served restarts
        # after the first backoff): the connection's teardown below can take a while, and /status asked
        # meanwhile must not show a server that is down with no retry planned.
        self._phase, self._failures, self._failed_at = "unavailable", 1, self._monotonic()
        self._retry_at = self._now() + timedelta(seconds=BACKOFF_FIRST_SECONDS)
        self.ready.clear()
        self._client = None
        self._broken.set()  # tells the connection to close
        await asyncio.gather(connection, return_exceptions=True)
        return True

    async def _connection(self, ready: asyncio.Event) -> None:
        """The whole life of one client, in this one task (anyio's rule)."""
        refusal = HttpRefusal()
        self._overflow = overflow = Overflow()
        self._exited, self._exit_status = asyncio.Event(), None
        try:
            async with AsyncExitStack() as stack:
                transport = await open_transport(
                    self.name,
                    self.config,
                    stack,
                    workspace=self._workspace,
                    log_dir=self._log_dir,
                    refusal=refusal,
                    started=self._now(),
                    overflow=overflow,
                    on_overflow=self._overflowed,
                    on_exit=self._process_exited,
                )
                client = await stack.enter_async_context(Client(transport, client_info=CLIENT_INFO))
                self._on_tools(await list_all_tools(client))
                self._client = client
                ready.set()
                await self._broken.wait()
                self._client = None
        except Exception as exc:
            if not self._broken.is_set() or self._reason is None:
                what = "it failed" if ready.is_set() else "it failed to start"
                self._reason = f"{what}: {describe(exc)}"
                if overflow.happened:
                    self._reason = f"{what}: the server {overflow.words()}"
                elif (missing := missing_path(self.name, self.config, self._workspace, exc)) is not None:
                    self._reason = f"it failed to start: {missing}"
                elif refusal.status is not None:
                    self._reason = f"{what}: {refusal_reason(self.name, self.config, refusal.status)}"
                else:
                    self._reason += self._last_words(ready.is_set()) + self._log_hint()
            self._broken.set()

    async def _wait(self, *waits: Awaitable[Any]) -> None:
        """Until the first of `waits` ends, or klaw stops."""
        await self._first(self._stopping.wait(), *waits)

    @staticmethod
    async def _first(*waits: Awaitable[Any]) -> None:
        tasks = [asyncio.ensure_future(wait) for wait in waits]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_and_wait(*tasks)  # a cancel of the caller meanwhile is not swallowed (decision 428)
