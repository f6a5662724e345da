"""A mistyped command line said as every other refusal is: `error: …` on stderr (decision 502).

typer draws click's usage errors (a missing option, a bad value, an unknown word) in a box titled
"Error" ("╭─ Error ─…"), and click's plain form says "Error: …"; every refusal of klaw's own says
`error: …` (cli/context.py `fail`), so a person or a script saw two spellings (newcomer21: `klaw db
migrate` without `--to`, `klaw bench locomo --backend sqlte`). The root group runs its commands with
click's standalone mode off and says such an error itself: the `error:` line first, then the usage
and where the help is. The exit statuses are click's (2 for a usage error, 1 for an abort).
"""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import typer
from rich.text import Text
from typer._click import exceptions

from klaw.cli.context import err_console


def run_standalone(main: Any, *args: Any, **extra: Any) -> NoReturn:
    """`main(*args, standalone_mode=False, **extra)` as click's standalone mode runs it, its errors said
    with klaw's prefix; exits with the command's status."""
    try:
        status = main(*args, standalone_mode=False, **extra)
    except exceptions.ClickException as exc:
        say(exc)
        sys.exit(exc.exit_code)
    except typer.Abort:
        err_console.print("Aborted.", highlight=False)
        sys.exit(1)
    # without standalone mode a command's `raise typer.Exit(n)` comes back as n; a finished command's value
    # is not an exit status (click's standalone mode exits 0 after it)
    sys.exit(status if isinstance(status, int) and not isinstance(status, bool) else 0)


def say(exc: exceptions.ClickException) -> None:
    """`error: MESSAGE`, then for a usage error the command's usage and how to see its help."""
    if type(exc).__name__ == "NoArgsIsHelpError":  # `klaw` alone: typer has shown its help, the answer
        return
    err_console.print(Text.assemble(("error:", "red"), f" {exc.format_message()}"), highlight=False)
    ctx = getattr(exc, "ctx", None)
    if ctx is not None:
        err_console.print(Text(ctx.get_usage()), highlight=False)
        if ctx.command.get_help_option(ctx) is not None:
            err_console.print(Text(f"Try '{ctx.command_path} {ctx.help_option_names[0]}' for help."), highlight=False)
