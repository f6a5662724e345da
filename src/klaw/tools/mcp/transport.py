"""How klaw reaches one configured MCP server: a command over stdio, or a streamable-HTTP URL.

A command gets the SDK's minimal safe environment (PATH, HOME, …) plus only the variables its `env`
names, never klaw's whole environment (which holds the model keys); it runs in the workspace unless
`cwd` says otherwise, and its stderr goes to `KLAW_HOME/mcp/<server>.log` (0600), not into the
terminal of `klaw chat`. That file is appended to, a line marking each start: a server that crashed is
restarted within a second, and its last words must outlive the restart; past `LOG_MAX_BYTES` only its
newest `LOG_KEEP_BYTES` are kept, at the next start.

A URL server gets the headers whose values its `authorizationEnv` and `headersEnv` variables hold. A
variable that is not set is a start failure naming it. A URL server that refuses the key is named as
such (`refusal_reason`): 401, a key missing or wrong, with the setting that
fixes it; 403, a key taken but without permission there (or none given): the SDK itself only says
"Server returned an error response".
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TextIO

import httpx2
from mcp import StdioServerParameters
from mcp.client import Transport
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from klaw.config import McpServerConfig
from klaw.errors import KlawError
from klaw.private_files import open_private, private_dirs

LOG_MAX_BYTES = 1_000_000  # a server's error output past this is cut at its next start…
LOG_KEEP_BYTES = 500_000  # …to about its newest half (from a line's start)


class MissingVariable(KlawError, RuntimeError):
    """A variable the server's config names is not set in klaw's environment."""


@dataclass
class HttpRefusal:
    """The last 401 or 403 a URL server answered (its response hook), to name in the start failure."""

    status: int | None = None

    async def hook(self, response: httpx2.Response) -> None:
        if response.status_code in (401, 403):
            self.status = response.status_code


def refusal_reason(name: str, config: McpServerConfig, status: int) -> str:
    """Why a URL server refused klaw, and what fixes it: a 401 wants a (valid) key, the engine.yaml setting
    naming its variable; a 403 refuses what it was given: a key it took but that may not use this server
    (its permissions are the server's to change), or no key at all."""
    where = f"mcp.servers.{name}.authorizationEnv"
    variable = config.authorization_env
    if status == 403:
        if variable is None:
            return (
                "the server answered 403 Forbidden: it does not let klaw in without a key; if it takes one, set"
                f" {where} in engine.yaml to the name of the environment variable holding it (docs/mcp.md)"
            )
        return (
            f"the server answered 403 Forbidden: the key in {variable} ({where}) is accepted but lacks"
            f" permission for this server: grant that key access on the server's side, or put a key that has"
            f" it in {variable}"
        )
    answered = "the server answered 401 Unauthorized"
    if variable is None:
        return (
            f"{answered}: it wants a key; set {where} in engine.yaml to the name of the environment variable"
            " holding it (sent as 'Authorization: Bearer <key>', docs/mcp.md)"
        )
    return f"{answered} to the key in {variable} ({where}): check that variable's value"


def _variables(names: Mapping[str, str], env: Mapping[str, str]) -> dict[str, str]:
    """{key: value of the variable named}; MissingVariable names the first unset one."""
    values: dict[str, str] = {}
    for key, variable in names.items():
        value = env.get(variable)
        if not value:
            raise MissingVariable(f"environment variable {variable} is not set (named by the server's config)")
        values[key] = value
    return values


async def open_transport(
    name: str,
    config: McpServerConfig,
    stack: AsyncExitStack,
    *,
    workspace: Path,
    log_dir: Path,
    env: Mapping[str, str] | None = None,
    refusal: HttpRefusal | None = None,
    started: datetime | None = None,
) -> Transport:
    """A transport for `mcp.Client`, its resources (log file, HTTP client) closed by `stack`; a URL server's
    401/403 is noted in `refusal`; a command's start is marked in its log with `started`."""
    env = os.environ if env is None else env
    if config.url is not None:
        headers = _variables(dict(config.headers_env), env)
        if config.authorization_env is not None:
            key = _variables({"key": config.authorization_env}, env)["key"]
            headers["Authorization"] = f"Bearer {key}"
        hooks = {"response": [refusal.hook]} if refusal is not None else {}
        client = await stack.enter_async_context(
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0), event_hooks=hooks)
        )
        return streamable_http_client(config.url, http_client=client)
    assert config.command is not None
    variables = _variables({variable: variable for variable in config.env}, env)
    params = StdioServerParameters(
        command=config.command, args=list(config.args), env=variables, cwd=config.cwd or str(workspace)
    )
    return stdio_client(params, errlog=stack.enter_context(_stderr_log(log_dir, name, started)))


def log_path(log_dir: Path, name: str) -> Path:
    """Where a command server's error output goes."""
    return log_dir / f"{name}.log"


def _stderr_log(log_dir: Path, name: str, started: datetime | None) -> TextIO:
    """The server's log, opened to append (its earlier runs kept, cut to their tail when too long), with
    a line marking this start: the child process writes to the same file after it."""
    private_dirs(log_dir)
    path = log_path(log_dir, name)
    fd = open_private(path, os.O_RDWR | os.O_APPEND)
    os.fchmod(fd, 0o600)
    _keep_tail(fd)
    when = (started or datetime.now().astimezone()).isoformat(timespec="seconds")
    os.write(fd, f"--- klaw started MCP server {name!r} at {when} ---\n".encode())  # before the child's output
    return open(fd, "a", encoding="utf-8", errors="replace")  # closed by the caller's exit stack


def _keep_tail(fd: int) -> None:
    """Past LOG_MAX_BYTES, the file cut to its newest LOG_KEEP_BYTES, from the first line start in them."""
    size = os.fstat(fd).st_size
    if size <= LOG_MAX_BYTES:
        return
    tail = os.pread(fd, LOG_KEEP_BYTES, size - LOG_KEEP_BYTES)
    newline = tail.find(b"\n")
    tail = tail[newline + 1 :] if 0 <= newline < len(tail) - 1 else tail
    os.ftruncate(fd, 0)
    os.write(fd, b"[earlier output cut: the log grew past 1 MB]\n" + tail)
