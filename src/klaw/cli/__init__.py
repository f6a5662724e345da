"""The `klaw` command: `noun verb` subcommands, each module one noun."""

from klaw.cli.app import app, main

__all__ = ["app", "main"]
