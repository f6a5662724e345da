"""`klaw service install|uninstall|status`: keeping klaw running as a systemd user service.

One unit, `klaw.service`, runs `klaw serve` (engine and gateway in one process) for this KLAW_HOME,
restarted on failure, in `$XDG_CONFIG_HOME/systemd/user/` (default `~/.config/systemd/user/`).
Install writes the unit and prints the `systemctl --user` commands that start it: klaw never enables
a service on its own, so a person sees what will run at login (decision 061). Uninstall stops and
disables it before removing the unit (after, systemctl no longer finds it to disable). The service's variables
(API keys, tokens, `KLAW__…` overrides) come from `KLAW_HOME/service.env`, never from the shell that
installed it; install names the ones the configuration needs that the file does not set (decision 227).
A refusal (exit 2: a configuration mistake, a missing token, a port in use) is not restarted: it would only
repeat every 5 s until a person fixes it; uninstall removes only the unit of the home it runs for (decision 397).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from klaw.atomic_file import replace_file
from klaw.cli.context import fail, home_from_env, load_or_exit, stdout_console
from klaw.cli.service_env import SERVICE_ENV, Needed, copy_values, names_in, needed, write_template
from klaw.home import HOME_ENV_VAR, KlawHome
from klaw.home_lock import holder_of

app = typer.Typer(
    rich_markup_mode="markdown",
    help="Run klaw as a systemd user service (klaw serve, restarted on failure).",
    no_args_is_help=True,
)

UNIT_NAME = "klaw.service"
# The unit's home line as klaw writes it (quoted) or as a person may have edited it (bare, no spaces).
_HOME_LINE = re.compile(rf'Environment=(?:"{HOME_ENV_VAR}=(?P<quoted>(?:[^"\\]|\\.)*)"|{HOME_ENV_VAR}=(?P<bare>\S+))')


def unit_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "systemd" / "user"


def unit_text(home: KlawHome) -> str:
    """The unit: `python -m klaw serve` of this installation, for this home, restarted on failure, with the
    variables of `service.env` (the `-`: a missing file is no error)."""
    command = _specifiers(shlex.join([sys.executable, "-m", "klaw", "serve"]))
    return "\n".join(
        [
            "[Unit]",
            "Description=klaw: personal AI agent (engine and gateway)",
            # After= alone orders, pulling nothing in (newcomer19). A user manager has no such target of its own, so
            # there both lines are harmless no-ops; a copy run as a system unit waits for the network with them.
            "Wants=network-online.target",
            "After=network-online.target",
            "",
            "[Service]",
            "Type=simple",
            f'Environment="{HOME_ENV_VAR}={_quoted(str(home.root))}"',
            f"EnvironmentFile=-{_specifiers(str(home.root / SERVICE_ENV))}",
            f"ExecStart={command}",
            "Restart=on-failure",
            "RestartSec=5",
            "# klaw exits 2 when it refuses to start (a configuration mistake, a missing token, a port in use):",
            "# a restart would only say it again every 5 s until a person fixes it (klaw service status shows it).",
            "# A home another klaw process holds (klaw mcp serve, klaw chat) exits 75: restarted, so the service",
            "# starts once that process is gone. So does a PostgreSQL server that does not answer yet: a user unit",
            "# cannot wait for the system's postgresql.service, so klaw is started again until it answers.",
            "RestartPreventExitStatus=2",
            "TimeoutStopSec=30",
            "UMask=0077",
            "",
            "[Install]",
            "WantedBy=default.target",
            "",
        ]
    )


def _specifiers(text: str) -> str:
    """`text` with systemd's `%` specifiers escaped: a home at `…/h%Z` made systemd drop the whole line
    ("Failed to resolve specifiers"), so the service ran without KLAW_HOME on ~/.klaw (adversary16)."""
    return text.replace("%", "%%")


def _quoted(value: str) -> str:
    """`value` inside a double-quoted systemd assignment: backslashes and quotes escaped, `%` doubled."""
    return _specifiers(value.replace("\\", "\\\\").replace('"', '\\"'))


def _unquoted(value: str) -> str:
    """What `_quoted` made, read back (a unit klaw wrote before escaping reads the same unless it held `%`)."""
    return re.sub(r'\\([\\"])|%%', lambda m: m.group(1) or "%", value)


def served_home(path: Path) -> str | None:
    """The KLAW_HOME the unit at `path` runs `klaw serve` for, or None (no unit, or not one klaw wrote)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    for line in text.splitlines():
        if (found := _HOME_LINE.fullmatch(line.strip())) is not None:
            return _unquoted(found["quoted"] if found["quoted"] is not None else found["bare"])
    return None


@app.command()
def install(
    copy_env: Annotated[
        bool,
        typer.Option(
            "--copy-env",
            help="Also copy the values this shell holds for the variables the configuration names (API keys,"
            " tokens) and its KLAW__ overrides into KLAW_HOME/service.env (0600; values are never printed).",
        ),
    ] = False,
) -> None:
    """Write the systemd user unit for `klaw serve` and say how to start it."""
    home = home_from_env()
    config = load_or_exit(home).config  # a unit that would fail at start is not written
    path = unit_dir() / UNIT_NAME
    before = served_home(path)
    replace_file(path, unit_text(home).encode("utf-8"))
    console = stdout_console(highlight=False)
    console.print(f"wrote {path} (klaw serve for KLAW_HOME={home.root})")
    if before is not None and before != str(home.root):  # one unit, one home: the other one is no longer served
        console.print(
            f"replaced the unit that ran klaw serve for KLAW_HOME={before}: that home is no longer served"
            f" once systemd reloads (a running service keeps serving it until 'systemctl --user restart {UNIT_NAME}')"
        )
    _service_env(console, home.root / SERVICE_ENV, needed(config, os.environ), copy=copy_env)
    _running_now(console, home)
    if (unreachable := _no_user_manager()) is not None:  # said as it is, not "start it now" (decision 489)
        console.print(unreachable)
        console.print(
            "so nothing can start the unit from here. Where your user's systemd runs (a login session on this"
            f" machine): systemctl --user daemon-reload; systemctl --user enable --now {UNIT_NAME}."
            " Until then, or on a machine without one, run 'klaw serve' yourself or under its supervisor"
            " (docs/running-it.md)"
        )
        return
    console.print("start it now and at every login:\n  systemctl --user daemon-reload")
    console.print(f"  systemctl --user enable --now {UNIT_NAME}")
    console.print("to keep it running after you log out: loginctl enable-linger")


def _running_now(console: Console, home: KlawHome) -> None:
    """Name what holds this home now (a `klaw serve` run by hand, newcomer22): the service started meanwhile
    exits 75 and systemd starts it again every 5 s until the home is free, which is how it takes over once that
    process stops (decision 435), but looks like a broken unit. So: stop it first (decision 513)."""
    holder = holder_of(home.root)
    if holder is None:
        return
    stop = f"kill {holder.pid}, or Ctrl-C in its terminal" if holder.pid else "Ctrl-C in its terminal"
    console.print(
        f"{holder.describe()} is running on this home now: stop it first ({stop}), then start the unit."
        f" Started while it runs, the service exits 75 (the home is held) and systemd starts it again every 5 s"
        f" until the home is free"
    )


def _service_env(console: Console, env_file: Path, wanted: list[Needed], *, copy: bool) -> None:
    """Write the template (or copy values when asked), then name what the service will still lack."""
    if copy:
        copied, refused = copy_values(env_file, [item.name for item in wanted], os.environ)
        if copied:
            console.print(f"copied this shell's {', '.join(copied)} into {env_file} (0600)")
        for name in refused:
            console.print(f"not copied: {name} holds a line break, which {env_file} cannot hold")
    elif not env_file.exists():
        write_template(env_file, wanted)
        console.print(f"wrote {env_file} (0600): the service's variables, one NAME=value line each; no values yet")
    present = names_in(env_file)
    missing = [item for item in wanted if item.name not in present]
    if not missing:
        return
    console.print(f"the service gets only the variables {env_file} sets; it will not have:")
    for item in missing:
        shell = "set in this shell" if item.in_shell else "not set in this shell either"
        console.print(f"  {item.name} ({item.why}), {shell}")
    if not copy and any(item.in_shell for item in missing):
        console.print(
            f"add them to {env_file}, or run 'klaw service install --copy-env' to copy the values this shell holds"
        )
    else:  # --copy-env copied what this shell holds: saying "run --copy-env" again went round (decision 489)
        none = not any(item.in_shell for item in missing)
        console.print(f"add them to {env_file} as NAME=value lines" + (": this shell has none of them" if none else ""))


@app.command()
def uninstall() -> None:
    """Stop and disable the service (systemctl --user disable --now klaw.service), then remove the unit."""
    path = unit_dir() / UNIT_NAME
    console = stdout_console(highlight=False)
    if not path.exists():
        console.print(f"no unit at {path}: nothing to remove")
        return
    served, here = served_home(path), str(home_from_env(must_exist=False).root)  # it may be gone already
    if served is not None and served != here:  # one unit for every home: it may be another home's
        fail(
            f"{path} runs klaw serve for KLAW_HOME={served}, not for this home ({here}): nothing removed."
            f" To remove it: KLAW_HOME={shlex.quote(served)} klaw service uninstall"
        )
    # Disabled while the unit is still there: once it is gone, systemctl cannot find it to disable.
    stopped = _systemctl("disable", "--now", UNIT_NAME)
    path.unlink()
    if stopped is None:
        console.print(f"removed {path} (systemctl is not available here: nothing to stop)")
        return
    if stopped.returncode != 0:
        said = (stopped.stderr or stopped.stdout).strip().splitlines()
        console.print(
            f"removed {path}; systemctl could not stop it ({said[-1] if said else 'no reason given'}):"
            f" if klaw still runs as a service, stop it with: systemctl --user stop {UNIT_NAME}"
        )
        return
    _systemctl("daemon-reload")
    console.print(f"stopped and disabled {UNIT_NAME}, removed {path}")


def _systemctl(*args: str) -> subprocess.CompletedProcess[str] | None:
    """`systemctl --user ARGS`, or None where there is no systemctl."""
    if shutil.which("systemctl") is None:
        return None
    try:
        return subprocess.run(["systemctl", "--user", *args], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(["systemctl"], 1, "", f"{type(exc).__name__}")


@app.command()
def status() -> None:
    """Whether the unit is installed, and what systemd says of it."""
    path = unit_dir() / UNIT_NAME
    console = stdout_console(highlight=False)
    if not path.exists():
        console.print(f"not installed (no {path}); klaw service install writes it")
        raise typer.Exit(3)
    served, here = served_home(path), str(home_from_env(must_exist=False).root)
    other = "" if served == here else ", not this home"
    whose = "" if served is None else f" (klaw serve for KLAW_HOME={served}{other})"
    console.print(f"installed: {path}{whose}")
    if (unreachable := _no_user_manager()) is not None:
        console.print(unreachable)
        raise typer.Exit(4)  # installed, state unknown (LSB status code 4)
    result = _systemctl("is-active", UNIT_NAME)
    state = (result.stdout or result.stderr).strip() if result is not None else ""
    console.print(f"systemd: {state or 'unknown'}")
    if state == "failed":
        console.print(f"why: journalctl --user -u {UNIT_NAME} -n 20 (a refusal at start is not restarted)")


def _no_user_manager() -> str | None:
    """What to say when `systemctl --user` cannot reach this user's systemd (no systemctl; a container or an
    `su` shell without a user bus: 'Failed to connect to bus'), or None when it can."""
    result = _systemctl("show-environment")
    if result is None:
        return "systemctl is not available here: run 'klaw serve' under the supervisor this machine has"
    if result.returncode == 0:
        return None
    said = (result.stderr or result.stdout).strip().splitlines()
    return (
        f"systemctl --user cannot reach your user's systemd here ({said[-1] if said else 'no reason given'}):"
        " it runs in a login session (a desktop or SSH login; 'loginctl enable-linger' keeps it after logout);"
        " in a container, run 'klaw serve' under the container's own supervisor (docs/running-it.md)"
    )
