"""Flags show no value type in `--help`.

typer 0.29 prints each option's type in the help table's type column, flags included: `--help`,
`--verbose`, `--force` and every other switch read `<bool>`, as if they took a value
(`--force <bool>`), which they do not (`--force true` is an error). click's own plain help never
showed one. `install()` makes the help of every command leave that column empty for a flag,
`--x/--no-x` pairs included; options that take a value keep their `<str>`, `<int>`… It wraps
`TyperOption.display_type_rich`, the one method typer asks (for the help option too, which click
creates per command), so no command has to remember it; it is called when `klaw.cli.app` is imported.
"""

from __future__ import annotations

from typer._click import Context
from typer.core import TyperOption

_typer_display_type = TyperOption.display_type_rich


def _display_type(option: TyperOption, ctx: Context) -> str | None:
    if option.is_flag:
        return None  # a switch: there is no value to describe
    return _typer_display_type(option, ctx)


def install() -> None:
    """Make flags show no type in every command's help; calling it again changes nothing."""
    TyperOption.display_type_rich = _display_type  # type: ignore[method-assign,assignment]
