"""What a library program passes to `Klaw` and its methods, read or refused in words before anything is
created or stored: the home, `model=`, `embedder=`, `clock=`, `listen=`, `tools=`, the callbacks, a chat's
name, a search's query, `limit=`/`session=` (decision 292 for chats; decision 365; the
refusals of libguard's change: `InvalidArgument`, a TypeError too, where a bare TypeError or a later
AttributeError came before), and what to do instead of a second engine on a home one runs on.

Kept apart from library.py, whose job is the engine's life and its calls; `klaw.library` re-exports the
two exceptions, so `klaw.InvalidChat` and `klaw.InvalidArgument` stay where programs find them.
"""

from __future__ import annotations

import os
from pathlib import Path

from klaw.engine.clock import Clock
from klaw.errors import KlawError
from klaw.home import KlawHome
from klaw.llm.protocol import ChatModel
from klaw.memory.embedder.checked import checked
from klaw.memory.embedder.protocol import Embedder
from klaw.scheduling.names import typed_chat_target
from klaw.store.records import ChatRef, chat_id_problem
from klaw.tools.provider_shape import takes_tool_setup

LIBRARY_CHANNEL = "library"


class InvalidChat(KlawError, ValueError):
    """A `chat` argument that names no chat: neither a name (a non-empty str) nor a `ChatRef`."""


class InvalidArgument(KlawError, TypeError):
    """An argument of `Klaw(...)` or of one of its methods of a kind it does not take: the message names
    the argument, what it takes, and for a model name given as `model=`, where a name goes instead."""


async def talk_instead(home: KlawHome) -> str:
    """What a program can do instead of starting a second engine on a home one runs on: ask it over the
    web API the engine serves (docs/channels.md, "From a script"), or be the home's engine itself. The
    address is the one the serving process wrote (KLAW_HOME/web_address) and something answers at, never
    engine.yaml's port: a service's environment may set another, and that port may be another person's
    klaw, which the token would then be sent to (newcomer20, decision 489)."""
    from klaw.served_page import served_page

    page = await served_page(home)
    ask = (
        f'POST {{"text": …}} to {page.rstrip("/")}/api/messages?wait=120'
        if page is not None
        else f'when it serves the web page, POST {{"text": …}} to /api/messages?wait=120 at the address it'
        f" writes in {home.web_address_file} (none answers now)"
    )
    return (
        f"A program can ask the running engine instead: {ask} with the token in {home.web_token_file} as an"
        ' `Authorization: Bearer` key (docs/channels.md, "From a script");'
        " or run your program as the home's engine instead of it, with Klaw(home, listen=True), which"
        " klaw gateway and klaw mcp serve then talk to"
    )


def chat_of(chat: str | ChatRef) -> ChatRef:
    """A chat by name is `library:<name>`; a name with ":" is `channel:chat_id`, read as the CLI's
    `--chat` reads it (decision 292); `InvalidChat` for anything else, before anything is stored."""
    if isinstance(chat, ChatRef):
        return chat
    if not isinstance(chat, str):
        raise InvalidChat(
            f"the chat must be a name (a str such as 'alice') or a klaw.ChatRef, not {type(chat).__name__}"
        )
    if ":" in chat:
        try:
            ref = typed_chat_target(chat)
        except ValueError as exc:
            raise InvalidChat(
                f"the chat cannot be used: {exc} (a name without ':' is a chat of your program, e.g. 'alice')"
            ) from None
        problem = chat_id_problem(ref.chat_id)
        if problem is not None:
            raise InvalidChat(f"the chat cannot be used: {problem}")
        return ref
    problem = chat_id_problem(chat)
    if problem is not None:
        raise InvalidChat(f"the chat name cannot be used: {problem}; pass a short name such as 'alice'")
    return ChatRef(LIBRARY_CHANNEL, chat)


def home_of(home: object) -> KlawHome:
    """The home as given, or `InvalidArgument` before anything is created (a bare TypeError before)."""
    if isinstance(home, KlawHome):
        return home
    if isinstance(home, (str, os.PathLike)):
        return KlawHome(Path(home).expanduser())
    raise InvalidArgument(
        f"the home must be a directory (a str or pathlib.Path, e.g. Klaw('~/klaw-home')), not {type(home).__name__}"
    )


def model_of(model: object) -> ChatModel | None:
    """`model=` is a model object; a model's name there (before: accepted, then every `ask` failed and
    `aclose` raised AttributeError) is refused at once with where a name goes: routing.default."""
    if model is None:
        return None
    missing = [name for name in ("complete", "stream", "aclose") if not callable(getattr(model, name, None))]
    missing += [] if hasattr(model, "model_id") else ["model_id"]
    if not missing:
        return model  # type: ignore[return-value]  # the ChatModel protocol's members, checked
    if not isinstance(model, str):
        lacks = ", ".join(f"`{name}`" for name in missing)
        raise InvalidArgument(
            f"model= takes a klaw.ChatModel (e.g. FunctionModel(my_function)); the {type(model).__name__} given has no"
            f" {lacks}: wrap a plain function in FunctionModel, or implement the ChatModel protocol (docs/library.md)"
        )
    raise InvalidArgument(
        f"model= takes a model object (a klaw.ChatModel, e.g. FunctionModel(my_function)), not a model name"
        f" ({model!r}): to use a configured model by its name, leave model= out and set routing.default to"
        f" the model's id in config= or engine.yaml (with its entry under models:), e.g."
        f" config={{'routing': {{'default': {model!r}}}}} (docs/library.md)"
    )


def query_of(query: object) -> str:
    """A search's query is text with words in it; anything else is `InvalidArgument` (an AttributeError before;
    an empty one the store's `ArchivalError`, which klaw does not export: decision 538)."""
    if not isinstance(query, str):
        raise InvalidArgument(
            f"the query must be text (a str), e.g. search_memory('alice', 'the garden'), not {type(query).__name__}"
        )
    if not query.strip():
        raise InvalidArgument("the query is empty: say what to look for, e.g. search_memory('alice', 'the garden')")
    return query


MAX_LIMIT = 2**31 - 1
"""The largest `limit=` used: more than any chat holds. A larger one (10**30, "all of them") is read as this
one: passed on, it reached SQLite as an OverflowError ("int too big to convert"), and a search, which asks
for a few times the limit, overflowed from 2**62 (decision 365)."""


def count_of(name: str, value: object, *, least: int = 1) -> int:
    """A `limit=`/`session=` is a whole number of at least `least`: "x" reached the database as a
    MismatchError, "3" a bare TypeError, and -1 returned every message; each is refused in words."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{name}= takes a whole number (an int, e.g. {name}=10), not {type(value).__name__}")
    if value < least:
        raise InvalidArgument(f"{name}= takes a whole number of at least {least} (e.g. {name}=10), not {value}")
    return value


def limit_of(limit: object) -> int:
    """`limit=`, a whole number of at least 1; one past `MAX_LIMIT` means all there are, and is read so."""
    return min(count_of("limit", limit), MAX_LIMIT)


def session_of(session: object) -> int | None:
    """`session=` is None (the current session) or a session's id from `sessions`."""
    return None if session is None else count_of("session", session)


def tools_of(tools: object) -> tuple[object, ...]:
    """`tools=` is a list of functions; one function alone (before: "'function' object is not iterable")
    is refused with the list to write instead, not taken as `[fn]`: `tools=` reads as a list everywhere."""
    if callable(tools) or isinstance(tools, (str, bytes)) or not hasattr(tools, "__iter__"):
        raise InvalidArgument(
            f"tools= takes a list of functions (e.g. tools=[my_tool]), not {type(tools).__name__}"
            + (": put the one function in a list" if callable(tools) else "")
        )
    for fn in tools:
        if takes_tool_setup(fn):  # before: "tool 'provide' needs a description" (newcomer17, decision 455)
            name = getattr(fn, "__name__", "it")
            raise InvalidArgument(
                f"tools= takes tools; {name}(setup: ToolSetup) is a tool group's provider, which the engine"
                " calls itself when it loads the group from an installed package's `klaw.tools` entry point:"
                " install the package and add the group's name to tools.enabled in config= (docs/library.md,"
                " 'Tools from an installed package'), or pass the tool functions themselves here"
            )
    return tuple(tools)  # each one is read, or refused in words, where the engine builds its tools


def embedder_of(embedder: object) -> Embedder | None:
    """`embedder=` is None (the configured one) or an object with the `Embedder` protocol's members; anything
    else (before: accepted, then failing where the engine first embedded) is refused at `Klaw(...)`."""
    if embedder is None:
        return None
    missing = [name for name in ("embed", "aclose") if not callable(getattr(embedder, name, None))]
    missing += [name for name in ("model_id", "dim") if not hasattr(embedder, name)]
    if missing:
        lacks = ", ".join(f"`{name}`" for name in missing)
        raise InvalidArgument(
            f"embedder= takes a klaw.Embedder (model_id, dim, async embed(texts), async aclose()) or None for"
            f" the configured one; the {type(embedder).__name__} given has no {lacks} (docs/library.md)"
        )
    return checked(embedder)  # type: ignore[arg-type]  # its members checked here, its vectors at each answer (538)


def clock_of(clock: object) -> Clock | None:
    """`clock=` is None (the system's time) or an object with `now()` and `async sleep(seconds)`, such as
    `klaw.ManualClock()`; anything else (before: accepted, then failing at the first timer) is refused."""
    if clock is None:
        return None
    missing = [name for name in ("now", "sleep") if not callable(getattr(clock, name, None))]
    if missing:
        lacks = ", ".join(f"`{name}`" for name in missing)
        raise InvalidArgument(
            f"clock= takes a clock (e.g. clock=klaw.ManualClock()) or None for the system's time; the"
            f" {type(clock).__name__} given has no {lacks}"
        )
    return clock  # type: ignore[return-value]  # the Clock protocol's members, checked


def flag_of(name: str, value: object) -> bool:
    """A yes/no argument (`listen=`) is True or False: "no" is a true value, so before `listen="no"` opened
    the socket; it is refused, as any other kind is."""
    if not isinstance(value, bool):
        raise InvalidArgument(f"{name}= takes True or False, not {type(value).__name__}")
    return value


def callback_of(name: str, callback: object) -> object:
    """`approve=`/`on_message=` is an (async) function or None; anything else (before: accepted, then
    failing where the engine first called it) is refused at `Klaw(...)`."""
    if callback is not None and not callable(callback):
        raise InvalidArgument(
            f"{name}= takes a function (e.g. {name}=my_{name}) or None, not {type(callback).__name__}"
        )
    return callback
