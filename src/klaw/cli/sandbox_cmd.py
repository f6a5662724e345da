"""`klaw sandbox status|install`: which sandbox `code_execute` gets here, and its Python packages."""

from __future__ import annotations

from typing import Annotated

import typer

from klaw.cli.context import fail, home_from_env, load_or_exit, stdout_console

app = typer.Typer(
    rich_markup_mode="markdown", help="The sandbox code_execute runs code in (docs/sandbox.md).", no_args_is_help=True
)


@app.command()
def status() -> None:
    """Say which backend code_execute uses here, or why it is not offered."""
    from klaw.tools.sandbox.backend import Unavailable
    from klaw.tools.sandbox.choice import choose_backend

    home = home_from_env()
    config = load_or_exit(home).config
    console = stdout_console(highlight=False)
    backend = choose_backend(config.sandbox, home)
    if isinstance(backend, Unavailable):
        console.print(f"code_execute is not offered: {backend.reason}\nfix: {backend.fix}")
        raise typer.Exit(1)
    network = "on" if config.sandbox.network else "off"
    venv = home.sandbox_venv if home.sandbox_venv.is_dir() else "none (klaw sandbox install PKG makes one)"
    console.print(f"backend: {backend.name}\nnetwork: {network}\nvirtualenv: {venv}")
    console.print(f"memory outside the processes: {backend.kernel_memory()}")


@app.command(name="install", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def install_command(
    packages: Annotated[
        list[str] | None,
        typer.Argument(metavar="PACKAGE", help="Packages as pip takes them (pip's options too)."),
    ] = None,
) -> None:
    """Install Python packages into the sandbox's virtualenv (KLAW_HOME/sandbox/venv), for code_execute."""
    from klaw.tools.sandbox.venv import SandboxInstallError, install

    if not packages:  # click's "Missing argument" showed `{packages}...` (decision 527)
        fail("name the packages to install, as pip takes them: klaw sandbox install PACKAGE... (e.g. requests)")

    home = home_from_env()
    console = stdout_console(highlight=False)
    try:
        said = install(home.sandbox_venv, packages)
    except SandboxInstallError as exc:
        fail(str(exc), code=1)
    console.print(said)
    console.print(f"installed into {home.sandbox_venv}; code_execute's python sees them from its next call")
