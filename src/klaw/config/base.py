"""What every config section shares: camelCase aliases, unknown keys refused, values frozen; and the rule
that a `…Env` field names an environment variable, never the secret itself."""

from __future__ import annotations

import math
import re
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel

ENV_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def variable_name(secret: str, example: str) -> AfterValidator:
    """A `…Env` field names the environment variable holding a secret; the secret itself pasted there
    (`sk-…`, `123456:ABC…`) would be shown by `config show`, the settings page and every error naming
    the variable, so it is refused. The loader never repeats a `…Env` field's value in its error."""

    def check(value: str) -> str:
        if not ENV_VAR_NAME.match(value):
            raise ValueError(
                f"must be the name of an environment variable (letters, digits, _), not the {secret} itself:"
                f" put the {secret} in a variable (export {example}=…) and write its name ({example}) here"
            )
        return value

    return AfterValidator(check)


def http_url(value: str, *, query: bool = True) -> bool:
    """Whether `value` is an http(s) URL with a host (and a port, if any, that is a number in 0-65535), no
    white space, and a query only if `query`: what a client or a browser can open."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number in 0-65535
        usable = parts.scheme in ("http", "https") and bool(parts.hostname) and (query or not parts.query)
    except ValueError:  # the port, or an unclosed IPv6 bracket
        usable = False
    return usable and not any(c.isspace() for c in value)


def _http_base_url(value: str) -> str:
    """A server's base URL must be http(s) with a host: `htp//127.0.0.1:9/v1` or `ftp://…` passed
    `klaw config check` and failed only at the first chat, with start-up advice to start a server."""
    if not http_url(value):
        raise ValueError(
            "must be an http:// or https:// URL with a host, e.g. http://localhost:11434/v1 (Ollama)"
            " or https://api.openai.com/v1"
        )
    return value


ApiKeyEnv = Annotated[str, variable_name("key", "OPENAI_API_KEY")]
BaseUrl = Annotated[str, AfterValidator(_http_base_url)]
DsnEnv = Annotated[str, variable_name("connection string", "KLAW_DATABASE_URL")]


YEAR_SECONDS = 365 * 24 * 3600
MAX_NUMBER = 10**12
"""Any other number in the config (a count, a size, a weight): larger is a typo or a probe, and a value
past 2**63 overflows what it reaches (SQLite, setrlimit, timedelta)."""


def bounded_number(name: str, value: object) -> object:
    """Every number in the config is finite and within reason: `.inf` or `1e18` in a duration passed
    `klaw config check` and crashed the start with an OverflowError (timedelta, asyncio's clock). A
    `…Seconds` field is at most a year, a `…Ms` field a year in milliseconds, any other `MAX_NUMBER`."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"must be a finite number, not {value}")
    if name.endswith("_seconds"):
        limit, unit = YEAR_SECONDS, f"{YEAR_SECONDS} (a year, in seconds)"
    elif name.endswith("_ms"):
        limit, unit = YEAR_SECONDS * 1000, f"{YEAR_SECONDS * 1000} (a year, in milliseconds)"
    else:
        limit, unit = MAX_NUMBER, str(MAX_NUMBER)
    if abs(value) > limit:
        raise ValueError(f"must be at most {unit}" + (f", not {value:g}" if isinstance(value, float) else ""))
    return value


class Section(BaseModel):
    """Base for every config section: camelCase aliases, unknown keys rejected, values frozen, every
    number finite and bounded (`bounded_number`, a rule no field can forget)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)

    @field_validator("*", mode="after")
    @classmethod
    def _bounded(cls, value: object, info: ValidationInfo) -> object:
        return bounded_number(info.field_name or "", value)


MIN_BUDGET_TOKENS = 256
"""The least context budget taken (decision 487): `contextBudget: 1` passed, and each turn said "over the
0-token budget" and sent ~2,183 tokens anyway. Not what works (that depends on the prompt files and the
tools: `/context` shows them; the chat is told when the fixed layers do not fit), but a slip like `8` for
`8000` is refused at load with the field's name."""


def _enough_tokens(value: int) -> int:
    if value < MIN_BUDGET_TOKENS:
        raise ValueError(
            f"{value} tokens is too small a context budget: give the model's context window in tokens, at least"
            f" {MIN_BUDGET_TOKENS} (klaw's system prompt and tools alone take about 2,000; /context shows each layer)"
        )
    return value


BudgetTokens = Annotated[int, AfterValidator(_enough_tokens)]
"""A context budget in tokens, at least MIN_BUDGET_TOKENS, refused in words below it."""
