"""`KLAW_HOME/service.env`: the variables the systemd service gets (decision 227).

A service does not inherit the shell `klaw service install` ran in, so the API keys and tokens the
configuration names (`…Env` fields) and the shell's `KLAW__…` overrides would be missing there: every
turn would fail with "OPENAI_API_KEY … is not set", or the service would run another configuration.
The unit reads this file (`EnvironmentFile=-`); klaw writes it 0600 with names and comments only, and
puts a value there only when asked (`--copy-env`). No value is ever printed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from klaw.atomic_file import replace_file

if TYPE_CHECKING:  # the config's models load when a command reads the config, not for `klaw --help`
    from klaw.config import EngineConfig

SERVICE_ENV = "service.env"
_HEADER = """\
# Environment of klaw's systemd service (klaw service install; docs/running-it.md).
# One NAME=value line per variable, e.g. OPENAI_API_KEY=sk-...; lines starting with # are ignored.
# Keep this file private (chmod 600): it holds secrets. klaw service install --copy-env copies the
# values your shell holds for the variables listed below; after editing: systemctl --user restart klaw.service
"""


@dataclass(frozen=True)
class Needed:
    """A variable the service would need, why, and whether this shell has it (never its value)."""

    name: str
    why: str
    in_shell: bool


def needed(config: EngineConfig, env: Mapping[str, str]) -> list[Needed]:
    """The variables the configuration names, then the shell's `KLAW__…` overrides."""
    from klaw.config.variables import named_variables
    from klaw.config_loader import ENV_PREFIX

    wanted = [Needed(var.name, var.field, var.name in env) for var in named_variables(config)]
    overrides = sorted(name for name in env if name.upper().startswith(ENV_PREFIX))
    return wanted + [Needed(name, "overrides engine.yaml in this shell", True) for name in overrides]


def names_in(path: Path) -> set[str]:
    """The variables the file sets (systemd's EnvironmentFile syntax: NAME=value, # comments)."""
    if not path.exists():
        return set()
    names = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip().removeprefix("export ").strip()
        if line and not line.startswith(("#", ";")) and "=" in line:
            names.add(line.split("=", 1)[0].strip())
    return names


def write_template(path: Path, wanted: list[Needed]) -> None:
    """A new file: the header and each wanted variable as a commented line (no value)."""
    lines = [_HEADER] + [f"# {item.name}=    ({item.why})" for item in wanted]
    replace_file(path, ("\n".join(lines) + "\n").encode("utf-8"))


def copy_values(path: Path, names: list[str], env: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """Append `NAME="value"` for each name this shell holds and the file lacks; returns (copied, refused:
    a value with a line break, which the file's syntax cannot hold). The file stays 0600."""
    text = path.read_text(encoding="utf-8") if path.exists() else _HEADER
    copied, refused, present = [], [], names_in(path)
    for name in names:
        value = env.get(name)
        if value is None or name in present:
            continue
        if "\n" in value or "\r" in value:
            refused.append(name)
            continue
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        text = text.rstrip("\n") + f'\n{name}="{escaped}"\n'
        copied.append(name)
    replace_file(path, text.encode("utf-8"))
    path.chmod(0o600)
    return copied, refused
