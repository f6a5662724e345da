"""`klaw service install|uninstall|status`: keeping klaw running as a systemd user service.

One unit, `klaw.service`, runs `klaw serve` (engine and gateway in one process) for this KLAW_HOME,
restarted on failure, in `$XDG_CONFIG_HOME/systemd/user/` (default `~/.config/systemd/user/`).
Install writes the unit and prints the `systemctl --user` commands that start it: klaw never enables
a service on its own, so a person sees what will run at login (decision 061).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import typer
from rich.console import Console

from klaw.atomic_file import replace_file
from klaw.cli.context import home_from_env, load_or_exit
from klaw.home import HOME_ENV_VAR, KlawHome

app = typer.Typer(help="Run klaw as a systemd user service (klaw serve, restarted on failure).", no_args_is_help=True)

UNIT_NAME = "klaw.service"


def unit_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "systemd" / "user"


def unit_text(home: KlawHome) -> str:
    """The unit: `python -m klaw serve` of this installation, for this home, restarted on failure."""
    command = shlex.join([sys.executable, "-m", "klaw", "serve"])
    return "\n".join(
        [
            "[Unit]",
            "Description=klaw: personal AI agent (engine and gateway)",
            "After=network-online.target",
            "",
            "[Service]",
            "Type=simple",
            f'Environment="{HOME_ENV_VAR}={home.root}"',
            f"ExecStart={command}",
            "Restart=on-failure",
            "RestartSec=5",
            "TimeoutStopSec=30",
            "UMask=0077",
            "",
            "[Install]",
            "WantedBy=default.target",
            "",
        ]
    )


@app.command()
def install() -> None:
    """Write the systemd user unit for `klaw serve` and say how to start it."""
    home = home_from_env()
    load_or_exit(home)  # a unit that would fail at start is not written
    path = unit_dir() / UNIT_NAME
    replace_file(path, unit_text(home).encode("utf-8"))
    console = Console(markup=False, highlight=False)
    console.print(f"wrote {path} (klaw serve for KLAW_HOME={home.root})")
    console.print("start it now and at every login:\n  systemctl --user daemon-reload")
    console.print(f"  systemctl --user enable --now {UNIT_NAME}")
    console.print("to keep it running after you log out: loginctl enable-linger")


@app.command()
def uninstall() -> None:
    """Remove the unit (stop and disable it first: systemctl --user disable --now klaw.service)."""
    path = unit_dir() / UNIT_NAME
    console = Console(markup=False, highlight=False)
    if not path.exists():
        console.print(f"no unit at {path}: nothing to remove")
        return
    path.unlink()
    console.print(f"removed {path}; run: systemctl --user disable --now {UNIT_NAME}; systemctl --user daemon-reload")


@app.command()
def status() -> None:
    """Whether the unit is installed, and what systemd says of it."""
    path = unit_dir() / UNIT_NAME
    console = Console(markup=False, highlight=False)
    if not path.exists():
        console.print(f"not installed (no {path}); klaw service install writes it")
        raise typer.Exit(3)
    console.print(f"installed: {path}")
    if shutil.which("systemctl") is None:
        console.print("systemctl is not available here: cannot say whether it runs")
        return
    result = subprocess.run(
        ["systemctl", "--user", "is-active", UNIT_NAME], capture_output=True, text=True, timeout=10, check=False
    )
    console.print(f"systemd: {(result.stdout or result.stderr).strip() or 'unknown'}")
