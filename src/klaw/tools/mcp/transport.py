"""How klaw reaches one configured MCP server: a command over stdio, or a streamable-HTTP URL.

A command gets the SDK's minimal safe environment (PATH, HOME, …) plus only the variables its `env`
names, never klaw's whole environment (which holds the model keys); it runs in the workspace unless
`cwd` says otherwise, and its stderr goes to `KLAW_HOME/mcp/<server>.log` (0600, bounded while it runs:
server_log.py), not into the terminal of `klaw chat`. Its stdout is read a bounded line at a time
(stdio_lines.py): a line past the cap ends the connection.

A URL server's answers are read at most the same cap each, and asked for uncompressed (http_answers.py); the
SDK bounds each event of its own stream by it too.

A URL server gets the headers whose values its `authorizationEnv` and `headersEnv` variables hold. A
variable that is not set is a start failure naming it, found before starting (`start_mistake`) and not
retried. A URL server that refuses the key is named as such (`refusal_reason`): 401, a key missing or
wrong, with the setting that fixes it; 403, a key taken but without permission there (or none given):
the SDK itself only says "Server returned an error response".
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import httpx2
from mcp import StdioServerParameters
from mcp.client import Transport
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from klaw.config import McpServerConfig
from klaw.errors import KlawError
from klaw.llm.proxy import proxy_for
from klaw.tools.mcp.http_answers import IDENTITY, answer_cap
from klaw.tools.mcp.overflow import Overflow
from klaw.tools.mcp.sdk_stdio import unfit
from klaw.tools.mcp.server_log import log_path, server_stderr
from klaw.tools.mcp.stdio_lines import bounded_stdio_client

log = logging.getLogger(__name__)

__all__ = [
    "HttpRefusal",
    "MissingVariable",
    "log_path",
    "missing_path",
    "open_transport",
    "refusal_reason",
    "start_mistake",
]


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


def start_mistake(
    name: str, config: McpServerConfig, workspace: Path, env: Mapping[str, str] | None = None
) -> str | None:
    """Why a server cannot be started at all, asked before starting it: a variable its config names
    (`authorizationEnv`, `headersEnv`, a command's `env`) is not set in klaw's environment (`env`), or a
    command's program is not found as the spawn looks for it (on PATH for a bare name, else relative to its
    working directory) or its working directory does not exist; the engine.yaml key to fix named. None when
    none of these. A configuration's mistake, not the weather: klaw does not retry it (a running process
    never gains a variable: newcomer12, newcomer14)."""
    if (unset := _unset_variable(name, config, os.environ if env is None else env)) is not None:
        return unset
    if config.command is None:
        return None
    where, command, cwd = f"mcp.servers.{name}", config.command, Path(config.cwd or workspace)
    if config.cwd is not None and not cwd.is_dir():
        return f"its working directory {config.cwd!r} does not exist ({where}.cwd in engine.yaml)"
    if "/" not in command:
        found = shutil.which(command)
        if found is None:
            return f"there is no program {command!r} on PATH ({where}.command in engine.yaml)"
        return _missing_interpreter(command, Path(found), where)
    path = cwd / command
    if path.is_dir():
        return f"{command!r} is a directory, not a program ({where}.command in engine.yaml)"
    if not path.is_file():
        return f"there is no program {command!r} ({where}.command in engine.yaml)"
    if not os.access(path, os.X_OK):
        return (
            f"{command!r} is not executable ({where}.command in engine.yaml): chmod +x it, or make its"
            " interpreter the command and the file its first argument"
        )
    return _missing_interpreter(command, path, where)


def _unset_variable(name: str, config: McpServerConfig, env: Mapping[str, str]) -> str | None:
    """The first variable the server's config names that is not set here; or, for a header's value (the
    authorization token's), set but empty, which no server accepts. A variable passed to a command's
    `env` may be empty: "" is a value a program may read as such (decision 436)."""
    where = f"mcp.servers.{name}"
    named = [(variable, f"{where}.authorizationEnv", True) for variable in [config.authorization_env] if variable]
    named += [(variable, f"{where}.headersEnv.{header}", True) for header, variable in config.headers_env.items()]
    named += [(variable, f"{where}.env", False) for variable in config.env]
    for variable, key, header in named:
        said = f"the environment variable {variable} ({key} in engine.yaml names it)"
        if variable not in env:
            return f"{said} is not set here: export it before starting klaw (a service reads KLAW_HOME/service.env)"
        if header and not env[variable]:
            return (
                f"{said} is set here but empty, and a header needs a value: set it to the {_header(key)}"
                " before starting klaw (a service reads KLAW_HOME/service.env)"
            )
    return None


def _header(key: str) -> str:
    return "server's token" if key.endswith("authorizationEnv") else f"{key.rsplit('.', 1)[1]} header's value"


def _missing_interpreter(command: str, path: Path, where: str) -> str | None:
    """A script whose `#!` line names an interpreter this machine lacks: exec says ENOENT, which read as
    "there is no program" for a file that is there (adversary21). Only the usual forms are read: `#!/path`
    and `#!/usr/bin/env name`."""
    try:
        with path.open("rb") as script:
            first = script.readline(256)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", "replace").split()
    if not words:
        return None
    interpreter = words[0]
    if Path(interpreter).name == "env" and len(words) > 1 and not words[1].startswith("-"):
        if shutil.which(words[1]) is not None:
            return None
        interpreter = f"{words[1]} (on PATH, through {words[0]})"
    elif Path(interpreter).exists():
        return None
    return (
        f"{command!r} asks in its #! line for the interpreter {interpreter}, which this machine lacks"
        f" ({where}.command in engine.yaml): install it, fix the script's first line, or make an interpreter"
        " the command and the script its first argument"
    )


def _variables(names: Mapping[str, str], env: Mapping[str, str], *, empty: bool = False) -> dict[str, str]:
    """{key: value of the variable named}; MissingVariable names the first unset one (or empty one,
    unless `empty` values pass: a command's environment)."""
    values: dict[str, str] = {}
    for key, variable in names.items():
        value = env.get(variable)
        if value is None or (not value and not empty):
            state = "is not set" if value is None else "is empty"
            raise MissingVariable(f"environment variable {variable} {state} (named by the server's config)")
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
    overflow: Overflow | None = None,
    on_overflow: Callable[[], None] = lambda: None,
    on_exit: Callable[[int | None], None] = lambda code: None,
) -> Transport:
    """A transport for `mcp.Client`, its resources (log file, HTTP client) closed by `stack`; a URL server's
    401/403 is noted in `refusal`; a command's start is marked in its log with `started`. A line a command
    writes, or an answer a URL server sends, past the cap ends its connection, noted in `overflow`
    (stdio_lines.py, decision 298; http_answers.py, decision 309), and a URL server's tells `on_overflow` at
    once: the SDK may be reading an answer nobody waits for. A command's exit is told to `on_exit` at once
    (decision 514)."""
    env = os.environ if env is None else env
    overflow = Overflow() if overflow is None else overflow
    if config.url is not None:
        headers = _variables(dict(config.headers_env), env)
        if config.authorization_env is not None:
            key = _variables({"key": config.authorization_env}, env)["key"]
            headers["Authorization"] = f"Bearer {key}"
        headers |= IDENTITY
        hooks = [answer_cap(overflow, on_overflow)] + ([refusal.hook] if refusal is not None else [])
        # klaw's proxy rules (decisions 318, 335), not httpx's reading of the environment: a server on this
        # machine is asked directly, and GNOME's `socks://` is SOCKS5 instead of a failed start.
        proxy = proxy_for(config.url)
        client = await stack.enter_async_context(
            httpx2.AsyncClient(
                headers=headers,
                timeout=httpx2.Timeout(30.0),
                event_hooks={"response": hooks},
                proxy=None if proxy is None else proxy.for_httpx(),
                trust_env=False,
            )
        )
        return streamable_http_client(config.url, http_client=client, max_sse_event_size=overflow.limit)
    assert config.command is not None
    variables = _variables({variable: variable for variable in config.env}, env, empty=True)
    params = StdioServerParameters(
        command=config.command, args=list(config.args), env=variables, cwd=config.cwd or str(workspace)
    )
    errlog = await server_stderr(log_dir, name, started, stack)
    if (why := unfit()) is not None:  # an SDK whose private helpers changed: uncapped rather than broken
        _warn_once(why)
        return stdio_client(params, errlog)
    return bounded_stdio_client(params, errlog, overflow, name, on_exit)


@functools.cache
def _warn_once(why: str) -> None:
    log.warning("%s", why)


def missing_path(name: str, config: McpServerConfig, workspace: Path, exc: BaseException) -> str | None:
    """What is missing when the process could not be started at all (its error output is then empty:
    no process ran): the command, or the working directory, named with the engine.yaml key to fix."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if not isinstance(exc, FileNotFoundError) or config.command is None:
        return None
    # uvloop's process spawn leaves `filename` unset, so what is missing is looked up here
    where, command, cwd = f"mcp.servers.{name}", config.command, config.cwd
    if exc.filename == command or (exc.filename is None and not _program_exists(command, Path(cwd or workspace))):
        return f"there is no program {command!r} ({where}.command in engine.yaml)"
    if cwd is not None and (exc.filename == cwd or (exc.filename is None and not Path(cwd).is_dir())):
        return f"its working directory {cwd!r} does not exist ({where}.cwd in engine.yaml)"
    named = f"{exc.filename} does not exist" if exc.filename else "a file it needs does not exist"
    return f"{named} (starting {command!r}, {where} in engine.yaml)"


def _program_exists(command: str, cwd: Path) -> bool:
    """As the spawn finds it: on PATH for a bare name, else relative to the server's working directory."""
    if "/" not in command:
        return shutil.which(command) is not None
    return (cwd / command).is_file()
