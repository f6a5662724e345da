"""The root command's nouns, each imported only when it is the one run (click's documented LazyGroup).

Every `klaw` process imported every command module at start: `klaw chat` paid for the bench commands,
`klaw memory`, `klaw db migrate` and the rest, about a quarter of a second of CPU each time, and the test
suite starts `klaw` hundreds of times (decision 378). `LazyCommands` names each noun by
`"module:attribute"` (a `typer.Typer` group or a command function); the module is imported when the
noun is resolved, its click command built as `add_typer`/`command` on the root would have built it.
`klaw --help`, a typo's suggestion and a walk over the command tree load them all, so they show the
same list, descriptions and order as before.
"""

from __future__ import annotations

import importlib
from typing import Any, ClassVar

import typer
import typer.main
from typer._click import Command, Context
from typer.core import TyperGroup


class LazyCommands(TyperGroup):
    """A typer group whose `lazy` nouns are imported on first use; subclasses fill in `lazy`."""

    lazy: ClassVar[dict[str, str]] = {}  # name -> "module:attribute", in the order `--help` lists them
    first: ClassVar[tuple[str, ...]] = ()  # the lazy names listed before the group's own commands

    def list_commands(self, ctx: Context) -> list[str]:
        own = [name for name in super().list_commands(ctx) if name not in self.lazy]
        later = [name for name in self.lazy if name not in self.first]
        return [*self.first, *own, *later]

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        found = self.commands.get(cmd_name)
        if found is None and cmd_name in self.lazy:
            found = self.commands[cmd_name] = self._load(cmd_name)
        return found

    def resolve_command(self, ctx: Context, args: list[str]) -> tuple[str | None, Command | None, list[str]]:
        if args and args[0] not in self.commands and args[0] not in self.lazy:
            self.load_all(ctx)  # an unknown word: typer suggests the nearest from every command's name
        return super().resolve_command(ctx, args)

    def load_all(self, ctx: Context) -> dict[str, Command]:
        """Every command, imported now, in the order `--help` lists them (for a walk over the tree)."""
        return {name: command for name in self.list_commands(ctx) if (command := self.get_command(ctx, name))}

    def _load(self, name: str) -> Command:
        module_name, _, attribute = self.lazy[name].partition(":")
        target: Any = getattr(importlib.import_module(module_name), attribute)
        # The root's own settings, as `add_typer`/`command` on it would have passed them down.
        holder = typer.Typer(rich_markup_mode=self.rich_markup_mode, suggest_commands=self.suggest_commands)
        if isinstance(target, typer.Typer):
            holder.add_typer(target, name=name)
        else:
            holder.command(name=name)(target)
        return typer.main.get_group(holder).commands[name]
