"""The `klaw` command (placeholder while the foundation lands)."""

import typer

app = typer.Typer(no_args_is_help=True)


def main() -> None:
    app()
