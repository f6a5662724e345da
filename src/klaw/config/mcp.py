"""The `mcp:` section: MCP servers whose tools the model is offered (klaw/tools/mcp/).

A server is either a command klaw starts and talks to over stdio, or a streamable-HTTP URL. Secrets
never sit in engine.yaml: `env` names the variables passed through to a command (it gets only those
and a minimal safe set, not klaw's whole environment), `authorizationEnv` and `headersEnv` name the
variables whose values are sent as HTTP headers. A server is offered only when `tools.enabled` names
it as `mcp:<name>`; its tools reach the model as `<name>__<tool>`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, model_validator

from klaw.config.base import Section, variable_name

MCP_GROUP_PREFIX = "mcp:"  # `tools.enabled` names a server as mcp:<name>
SERVER_NAME = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9-]|_(?!_)){0,23}$")
HEADER_NAME = re.compile(r"^[A-Za-z0-9-]{1,64}$")
START_WAIT_MAX_SECONDS = 120.0  # the longest engine start-up waits for MCP servers

EnvName = Annotated[str, variable_name("value", "MY_MCP_KEY")]


def keys_matching(pattern: re.Pattern[str], refusal: Callable[[str], str]) -> AfterValidator:
    """A mapping whose every key matches `pattern`; the first that does not is refused with `refusal(key)`."""

    def check(mapping: dict[str, Any]) -> dict[str, Any]:
        for key in mapping:
            if not pattern.match(key):
                raise ValueError(refusal(key))
        return mapping

    return AfterValidator(check)


HeaderNames = keys_matching(
    HEADER_NAME, lambda name: f"header name {name[:64]!r} is invalid: use letters, digits and '-'"
)
ServerNames = keys_matching(
    SERVER_NAME,
    lambda name: (
        f"server name {name[:40]!r} is invalid: use 1-24 letters, digits, '-' or single '_'"
        " (it prefixes the server's tool names as <name>__<tool>)"
    ),
)


class McpServerConfig(Section):
    """One MCP server: `command` (+ `args`, `env`, `cwd`) or `url` (+ `authorizationEnv`, `headersEnv`)."""

    command: str | None = Field(default=None, min_length=1, description="Program to start (stdio transport).")
    args: tuple[str, ...] = Field(default=(), description="Its arguments.")
    env: tuple[EnvName, ...] = Field(
        default=(),
        description="Names of environment variables passed through to the command (their values never sit here).",
    )
    cwd: str | None = Field(default=None, description="Working directory of the command (default: the workspace).")
    url: str | None = Field(default=None, description="Streamable-HTTP endpoint, e.g. https://example.com/mcp.")
    authorization_env: EnvName | None = Field(
        default=None, description="Variable holding a key sent as 'Authorization: Bearer <key>' (url servers)."
    )
    headers_env: Annotated[dict[str, EnvName], HeaderNames] = Field(
        default_factory=dict, description="HTTP header name -> variable holding its value (url servers)."
    )
    timeout_seconds: float = Field(default=30.0, gt=0, le=600, description="Longest wait for one tool call.")
    start_timeout_seconds: float = Field(
        default=20.0, gt=0, le=600, description="Longest wait for the server to start and list its tools."
    )
    tools: tuple[str, ...] | None = Field(
        default=None, description="Offer only these of the server's tools (its own names); null = all."
    )
    max_tools: int = Field(default=20, ge=0, le=128, description="Most tools of this server offered to the model.")
    max_schema_tokens: int = Field(
        default=3000, ge=0, description="Most tokens the server's tool schemas may take (sent with every model call)."
    )

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (a program klaw starts) or url (a streamable-HTTP server)")
        if self.url is not None:
            if urlsplit(self.url).scheme not in ("http", "https") or not urlsplit(self.url).hostname:
                raise ValueError("url must be an http:// or https:// address")
            if self.args or self.env or self.cwd:
                raise ValueError("args, env and cwd are for a command; a url server takes authorizationEnv/headersEnv")
        elif self.authorization_env or self.headers_env:
            raise ValueError("authorizationEnv and headersEnv are for a url server; a command takes env")
        return self


def _no_prefix_of_another(servers: dict[str, Any]) -> dict[str, Any]:
    """Refuse servers `X` and `X_`: `X_`'s tool `t` and `X`'s tool `_t` both reach the model as
    `X___t`, and one would silently take the other's calls (decision 443). Other names cannot meet:
    a server name has no `__`, so the prefix up to the first `__` names one server."""
    for name in servers:
        if name.endswith("_") and name[:-1] in servers:
            other = name[:-1]
            raise ValueError(
                f"MCP servers {other!r} and {name!r} can give two tools one name ({name}'s tool 'search' and"
                f" {other}'s tool '_search' are both {name}__search): rename {name!r} (e.g. to"
                f" {(other + '-2')[:24]!r}) in mcp.servers and in tools.enabled"
            )
    return servers


class McpConfig(Section):
    """The MCP servers klaw can take tools from, by name."""

    servers: Annotated[dict[str, McpServerConfig], ServerNames, AfterValidator(_no_prefix_of_another)] = Field(
        default_factory=dict, description="Server name (the prefix of its tools) -> how to reach it."
    )
    start_wait_seconds: float = Field(
        default=5.0,
        ge=0,
        le=START_WAIT_MAX_SECONDS,
        description=(
            "How long engine start-up waits for servers to connect; slower ones join when ready. Unset, a piped"
            " `klaw chat` (one turn) waits until each has started or failed (its startTimeoutSeconds)."
        ),
    )
    check_interval_seconds: float = Field(
        default=60.0, gt=0, description="How often an idle server is asked for its tools (notices a dead or hung one)."
    )

    def one_turn_wait_seconds(self) -> float:
        """How long a one-shot run (`echo … | klaw chat`: one turn) waits for its servers: `startWaitSeconds`
        when the person set it, else until each has started or failed (its `startTimeoutSeconds`). A server
        that joins after that single turn's start joins nothing: its tools would be silently missing.
        """
        if "start_wait_seconds" in self.model_fields_set:
            return self.start_wait_seconds
        longest = max((server.start_timeout_seconds for server in self.servers.values()), default=0.0)
        return min(START_WAIT_MAX_SECONDS, max(self.start_wait_seconds, longest))

    def waiting_until_started(self) -> McpConfig:
        """This configuration with start-up waiting `one_turn_wait_seconds`: for a piped chat's one turn
        and a library program's first `ask` (decisions 252, 291), which would otherwise go without the
        tools of a server slower to start than the 5 s default."""
        return self.model_copy(update={"start_wait_seconds": self.one_turn_wait_seconds()})
