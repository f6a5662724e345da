"""What every command needs: the home directory, the loaded config, and friendly failures."""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

import typer
from rich.console import Console, RenderableType
from rich.text import Text

from klaw.disk_trouble import disk_trouble
from klaw.home import HOME_ENV_VAR, KlawHome
from klaw.home_privacy import describe_changes, make_private

if TYPE_CHECKING:
    from collections.abc import Mapping

    from klaw.config import DatabaseConfig, EngineConfig
    from klaw.config_loader import LoadedConfig
    from klaw.engine.delivery import Sink
    from klaw.engine.runtime import Engine
    from klaw.store.protocol import Storage
    from klaw.store.records import ChatRef


def stdout_console(**options: Any) -> Console:
    """Where commands print what they show (`options` are rich's: `markup=False` and `emoji=False` unless
    given, so text is shown as it is: a skill folder `:fire:` is not read as an emoji code). On a terminal rich
    wraps at its width; into a file or a pipe (`klaw memory list | grep`, a script, a service's journal) a line
    stays whole instead of being broken at rich's default 80 columns mid-sentence. A block rich pads to the
    width (Markdown, `Padding`) is printed as plain text by the command when `is_terminal` is false, or it is
    padded with spaces to column 80."""
    console = Console(**({"markup": False, "emoji": False} | options))
    if not console.is_terminal and "soft_wrap" not in options:
        console.soft_wrap = True
    return console


def stderr_console(**options: Any) -> Console:
    """Where commands say what went wrong or what they do: wrapped as `stdout_console`."""
    return stdout_console(stderr=True, **options)


err_console = stderr_console()

PIPED_MAX_WIDTH = 200  # a longer row (a list of tools, a long message) folds within its cell instead


def table_console(widest_row: int) -> Console:
    """Where a command prints a table. On a terminal, its width; into a pipe or a file (a bug report, a
    script) as wide as the widest row needs, up to `PIPED_MAX_WIDTH`, so a row stays on one line instead
    of folding at rich's default 80 columns (a date cut into "2026-11-2 / 7 13:07")."""
    console = Console(markup=False, emoji=False)
    if console.is_terminal:
        return console
    return Console(markup=False, emoji=False, width=max(console.width, min(widest_row, PIPED_MAX_WIDTH)))


def print_whole(console: Console, table: RenderableType) -> None:
    """Print `table` whole: on a terminal at its width (rich wraps the cells), into a pipe or a file at the
    table's own width, however wide. There rich's default of 80 columns cut the side-by-side tables' headers
    and names ("postgres/s…", "system_…": newcomer15), and no one can widen a file afterwards. Every command
    printing a table into a pipe uses it (`db status`, `db migrate`, `reindex`, `skills list`: newcomer20)."""
    from rich.measure import Measurement

    if console.is_terminal:
        console.print(table)
        return
    widest = Measurement.get(console, console.options.update_width(100_000), table).maximum
    width = console.width
    console.width = max(width, widest)
    try:
        console.print(table)
    finally:
        console.width = width


def home_from_env(*, must_exist: bool = True) -> KlawHome:
    """KLAW_HOME's home (default ~/.klaw). Every command that reads or writes a home needs it to exist
    (`require_home`): before, `schedule add` made a mistyped home's folder for its scheduler.db,
    `schedule list` and `log check` answered for an empty home, and `memory list` blamed an engine that
    had not started. `init`, `config path`, `config check` (exit 1: no engine.yaml) and the benches
    (which run on their own temporary homes) pass `must_exist=False`."""
    home = KlawHome.from_env()
    if must_exist:
        require_home(home)
    return home


def load_or_exit(home: KlawHome) -> LoadedConfig:
    """The effective configuration, or exit 2 with the validation message (no traceback).

    Every command that reads the config also makes the home private first, saying what it changed:
    a home an older klaw (or a person) left readable by others is tightened before anything runs."""
    loaded = load_or_why(home)
    if isinstance(loaded, str):
        fail(loaded)
    return loaded


def load_or_why(home: KlawHome) -> LoadedConfig | str:
    """`load_or_exit`'s configuration, or its validation message instead of the exit: `klaw chat` still
    attaches to a running engine, which runs on what it read at its start, while engine.yaml is being
    edited (check52: a half-made edit locked the person out of the agent that was running)."""
    from klaw.config_loader import ConfigError, load_config  # pydantic's models: not for `klaw --help`

    try:
        loaded = load_config(home.config_file)
    except ConfigError as exc:
        make_private_or_warn(home)
        return str(exc)
    make_private_or_warn(home)  # a database.path outside the home is not klaw's to chmod (decision 478)
    return loaded


class StoredHome(NamedTuple):
    """A command's home, its loaded config and the path of its database."""

    home: KlawHome
    loaded: LoadedConfig
    path: Path


def stored_home_or_exit(missing: str = "it is created when the engine first starts") -> StoredHome:
    """The home, its config and its database for a command that reads the memory, or exit 1 when the
    SQLite file is not there yet (`missing` says what that means for this command)."""
    home = home_from_env()
    loaded = load_or_exit(home)
    path = home.database_file(loaded.config.database.path)
    if loaded.config.database.backend == "sqlite" and not path.exists():
        fail(f"{path} does not exist yet: {missing}.", code=1)
    return StoredHome(home, loaded, path)


def make_private_or_warn(home: KlawHome, extra: list[Path] | None = None) -> None:
    """`make_private`, with one warning line naming how many paths others could read."""
    changed = make_private(home, extra or [])
    if changed:
        err_console.print(Text.assemble(("warning:", "yellow"), f" {describe_changes(changed)}"), highlight=False)


def say_while_stopping(console: Console, text: str) -> None:
    """Print `text` if the output is still there: after Ctrl-C in `klaw serve | tee log`, the pipe's
    reader got the same signal and is gone, and a failed print must not skip the shutdown after it
    (it left engine.sock and the WAL files behind)."""
    with suppress(OSError):  # BrokenPipeError: nobody reads the output any more (rich would exit 1 on it)
        console.file.write(text + "\n")
        console.file.flush()


# The exit of an engine start refused because another klaw process holds the home (a `klaw mcp serve`, a
# `klaw chat`, a reindex): EX_TEMPFAIL, "try again later", not 2, the mistake a person must fix. The unit
# `klaw service install` writes restarts it (`RestartPreventExitStatus=2` only), so the service starts
# once the holder is gone (decision 435).
HOME_HELD_EXIT = 75
# Said by an engine start whose PostgreSQL server did not answer, which exits HOME_HELD_EXIT too: a server not
# up yet (klaw started before it at boot) is no mistake to fix, and exit 2 left the service down (decision 475).
# Worded for both ways klaw runs (decision 480): the unit's environment is not told apart (a terminal's shell
# started by a systemd user service inherits its INVOCATION_ID and JOURNAL_STREAM).
RETRIED = (
    " Taken for a passing fault (the server may still be starting): exit 75. A service (klaw service install's"
    " unit) retries it every 5 s; run by hand: start it again once PostgreSQL is up."
)


def fail(message: str, code: int = 2) -> NoReturn:
    err_console.print(Text.assemble(("error:", "red"), f" {message}"), highlight=False)
    raise typer.Exit(code)


def asked(question: str, otherwise: str) -> bool:
    """`typer.confirm(question)` (default no); input that ends unanswered while stdin is not a terminal (a
    script's `< /dev/null`) is exit 2 saying `otherwise`, where typer said "Aborted." (exit 1: decision 502).
    Ctrl-C or Ctrl-D at a terminal stays typer's "Aborted."."""
    try:
        return typer.confirm(question, default=False)
    except typer.Abort:
        if sys.stdin.isatty():
            raise
        typer.echo("")  # after the question's line
        fail(f"stdin is not a terminal and gave no answer: {otherwise}")


def require_home(home: KlawHome) -> None:
    """Exit 2 when the home does not exist: an engine started there would create an empty home and run
    on defaults, so a mistyped KLAW_HOME looked like a klaw that had forgotten everything. `klaw init`
    (or the library's `Klaw(home)`) is what creates one."""
    refuse_a_file(home)
    if not home.root.is_dir():
        fail(
            f"There is no klaw home at {home.root} ({home_source()}). Check the path for a typo,"
            " or create a home there with 'klaw init'."
        )


def refuse_a_file(home: KlawHome) -> None:
    """Exit 2 when KLAW_HOME names a file (an engine.yaml, say): `mkdir` would fail with a traceback."""
    if home.root.exists() and not home.root.is_dir():
        fail(f"{home.root} is a file, not a klaw home ({home_source()}): point KLAW_HOME at a folder.")


def home_source() -> str:
    """Where the home's path came from, for messages about a home that is not what the person expected."""
    value = os.environ.get(HOME_ENV_VAR)
    return f"KLAW_HOME={value}" if value else "KLAW_HOME is not set"


async def open_store_or_exit(path: Path, database: DatabaseConfig, *, reads_only: bool = False) -> Storage:
    """klaw.db for a command that reads or edits it, through the storage protocol, or exit 2 with the
    store's message (a file SQLite cannot open, sqlite-vec that will not load and how to reinstall
    it), never a traceback. A database klaw never set up is left as it is: `StoreNotSetUp` passes through,
    for each command to say what that means for it (decision 467). `reads_only`: a command that only reads,
    which a full disk does not stop (decision 431): where the disk refused the usual open, klaw.db is opened
    to be read without writing."""
    from klaw.store.backend import open_storage  # apsw and sqlite-vec only for commands needing them
    from klaw.store.protocol import StorageError, StoreNotSetUp

    try:
        return await open_storage(path, database)
    except StoreNotSetUp:
        raise
    except StorageError as exc:
        trouble = disk_trouble(path, exc.__cause__) is not None
        if trouble and reads_only and database.backend == "sqlite":
            with suppress(StorageError):  # still refused (a read-only mount with no -wal to read): the first words
                return await open_storage(path, database, reading=True)
        # A full or read-only disk exits 1, as every command meeting one does (decision 320); a refusal, 2.
        fail(str(exc), code=1 if trouble else 2)


async def start_engine_or_exit(
    home: KlawHome,
    loaded: LoadedConfig,
    channels: Mapping[str, Sink] | None = None,
    *,
    config: EngineConfig | None = None,
    held_exit: int = HOME_HELD_EXIT,
    wait_if_held: Callable[[], Awaitable[bool]] | None = None,
    one_message: ChatRef | None = None,
) -> Engine:
    """A running engine on `config` (default: `loaded.config`, what `load_or_exit` read), noting the bytes of
    engine.yaml `loaded` was parsed from, so an edit made from then on is said to need a restart (decision
    474), or exit 2 with one line saying why it could not start: the store's message, a
    file it cannot write, or SQLite refusing part-way through start-up
    (another klaw process holding klaw.db: the second engine of a start race), never a traceback; exit 75
    (`HOME_HELD_EXIT`) when another klaw process holds the home, which a later start may find free;
    `held_exit` 2 for `klaw chat`, a person told what to do, as when it finds the holder before starting
    (decision 435; a chat that lost a start race to another exited 75, decision 443); `held_exit` too when no
    PostgreSQL server answered (decision 475). `one_message`: a piped chat's engine (`Engine.start`'s, decision 499)."""
    from klaw.engine.config_drift import ConfigFileNote
    from klaw.engine.runtime import Engine
    from klaw.engine.socket_file import EngineAlreadyRunningError
    from klaw.start_up_heap import keep_start_up_heap
    from klaw.store.backend import storage_failure
    from klaw.store.errors import ServerUnreachable
    from klaw.store.protocol import StorageError

    require_home(home)
    config = loaded.config if config is None else config
    while True:  # `wait_if_held`: a piped chat waits for another that won the start race (decision 487)
        try:
            engine = await Engine.start(
                home, config, channels=channels, config_file=ConfigFileNote.of(loaded), one_message=one_message
            )
            break
        except EngineAlreadyRunningError as exc:
            if wait_if_held is None or not await wait_if_held():
                fail(str(exc), held_exit)
        except ServerUnreachable as exc:  # PostgreSQL not up yet (a reboot): passing, not a mistake (decision 475)
            fail(f"{exc}{RETRIED if held_exit == HOME_HELD_EXIT else ''}", held_exit)
        except (StorageError, OSError, RuntimeError) as exc:
            from klaw.cli.edge_failures import edge_words

            fail(edge_words(exc, home.root) or str(exc))
        except Exception as exc:
            failure = storage_failure(home.database_file(config.database.path), config.database, exc)
            if failure is None:
                raise
            fail(str(failure))
    keep_start_up_heap()  # what the engine built at start is never scanned by the collector again
    return engine
