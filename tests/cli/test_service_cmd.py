"""`klaw service install|uninstall|status` write and remove a systemd user unit; never enable it.

XDG_CONFIG_HOME points at a temp dir, so the person's own systemd configuration is never touched.
The unit is checked by `systemd-analyze verify` where it is installed (skipped, saying so, otherwise).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.inited_home import init_home
from tests.cli.klaw_here import klaw_here
from tests.cli.test_cli import klaw


def test_install_writes_a_unit_for_klaw_serve_of_this_home_status_and_uninstall(tmp_path: Path) -> None:
    home, xdg = tmp_path / "home", tmp_path / "xdg"
    env = {"XDG_CONFIG_HOME": str(xdg)}
    init_home(home)
    assert klaw_here(home, "service", "status", env=env).returncode == 3  # not installed yet

    installed = klaw_here(home, "service", "install", env=env)
    assert installed.returncode == 0, installed.stderr
    unit = xdg / "systemd" / "user" / "klaw.service"
    text = unit.read_text(encoding="utf-8")
    assert f"ExecStart={sys.executable} -m klaw serve" in text
    assert f'Environment="KLAW_HOME={home}"' in text
    assert "Restart=on-failure" in text and "WantedBy=default.target" in text
    assert "systemctl --user enable --now klaw.service" in installed.stdout  # said, never done

    # a user manager that answers (this machine's may not: then status says so and exits 4, tested below)
    status = klaw_here(home, "service", "status", env={**_fake_systemctl(tmp_path, 'echo "inactive"; exit 0'), **env})
    assert status.returncode == 0 and f"installed: {unit}" in status.stdout
    assert "systemd: inactive" in status.stdout

    # no systemctl on PATH: the person's own user services are never stopped by a test
    removed = klaw_here(home, "service", "uninstall", env={**env, "PATH": str(Path(sys.executable).parent)})
    assert removed.returncode == 0 and not unit.exists()
    assert "systemctl is not available here: nothing to stop" in removed.stdout


def test_installing_for_a_second_home_says_it_replaced_the_unit_of_the_first(tmp_path: Path) -> None:
    """One unit serves one home: installing it for another home used to replace it without a word."""
    first, second, xdg = tmp_path / "a", tmp_path / "b", tmp_path / "xdg"
    env = {"XDG_CONFIG_HOME": str(xdg)}
    for home in (first, second):
        init_home(home)
    assert "replaced" not in klaw_here(first, "service", "install", env=env).stdout  # nothing was there
    again = klaw_here(first, "service", "install", env=env)
    assert again.returncode == 0 and "replaced" not in again.stdout  # the same home: nothing lost
    moved = klaw_here(second, "service", "install", env=env)
    assert moved.returncode == 0, moved.stderr
    said = " ".join(moved.stdout.split())
    assert f"replaced the unit that ran klaw serve for KLAW_HOME={first}: that home is no longer served" in said
    unit = (xdg / "systemd" / "user" / "klaw.service").read_text(encoding="utf-8")
    assert f'Environment="KLAW_HOME={second}"' in unit


def test_install_refuses_an_invalid_config(tmp_path: Path) -> None:
    home, xdg = tmp_path / "home", tmp_path / "xdg"
    home.mkdir()
    (home / "engine.yaml").write_text("processing:\n  debounceMs: soon\n", encoding="utf-8")
    result = klaw_here(home, "service", "install", env={"XDG_CONFIG_HOME": str(xdg)})
    assert result.returncode == 2 and "processing.debounceMs" in result.stderr
    assert not (xdg / "systemd" / "user" / "klaw.service").exists()


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed here")
def test_the_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    home, xdg = tmp_path / "home", tmp_path / "xdg"
    init_home(home)
    assert klaw_here(home, "service", "install", env={"XDG_CONFIG_HOME": str(xdg)}).returncode == 0
    unit = xdg / "systemd" / "user" / "klaw.service"
    # System mode: `--user` needs a running user manager, which a CI container has not. It checks the same:
    # known sections and keys, values that parse, an ExecStart that is executable.
    result = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "Unknown key" not in result.stderr, result.stderr


def test_install_names_the_variables_the_service_will_lack_and_copies_them_only_when_asked(tmp_path: Path) -> None:
    """A service does not inherit the shell: the key a model's apiKeyEnv names and a KLAW__ override must
    reach it through KLAW_HOME/service.env, which install names, never filling values in unasked."""
    home, xdg = tmp_path / "home", tmp_path / "xdg"
    init_home(home)
    (home / "engine.yaml").write_text(
        "models:\n  openai/gpt-4o-mini:\n    baseUrl: https://api.openai.com/v1\n    apiKeyEnv: OPENAI_API_KEY\n"
        "routing:\n  default: openai/gpt-4o-mini\n",
        encoding="utf-8",
    )
    secret = "sk-test-never-printed"
    env = {"XDG_CONFIG_HOME": str(xdg), "OPENAI_API_KEY": secret, "KLAW__PROCESSING__DEBOUNCEMS": "500"}
    installed = klaw_here(home, "service", "install", env=env)
    assert installed.returncode == 0, installed.stderr
    unit = (xdg / "systemd" / "user" / "klaw.service").read_text(encoding="utf-8")
    env_file = home / "service.env"
    assert f"EnvironmentFile=-{env_file}" in unit
    assert oct(env_file.stat().st_mode & 0o777) == "0o600"
    assert secret not in env_file.read_text(encoding="utf-8") and secret not in installed.stdout + installed.stderr
    said = " ".join(installed.stdout.split())
    assert "it will not have: OPENAI_API_KEY (models.openai/gpt-4o-mini.apiKeyEnv), set in this shell" in said
    assert "KLAW__PROCESSING__DEBOUNCEMS (overrides engine.yaml in this shell), set in this shell" in said
    assert "klaw service install --copy-env" in said

    copied = klaw_here(home, "service", "install", "--copy-env", env={**env, "OPENAI_API_KEY": 'sk-"odd\\'})
    assert copied.returncode == 0, copied.stderr
    assert "sk-" not in copied.stdout + copied.stderr and "will not have" not in copied.stdout
    text = env_file.read_text(encoding="utf-8")
    assert 'OPENAI_API_KEY="sk-\\"odd\\\\"' in text and 'KLAW__PROCESSING__DEBOUNCEMS="500"' in text
    assert oct(env_file.stat().st_mode & 0o777) == "0o600"


def test_copy_env_with_the_variable_unset_in_the_shell_says_so_and_does_not_recommend_itself(tmp_path: Path) -> None:
    """`--copy-env` with the variable unset said "… or run 'klaw service install --copy-env'" again
    (newcomer20, decision 489): it now says the shell does not have it either."""
    home, xdg = tmp_path / "home", tmp_path / "xdg"
    init_home(home)
    (home / "engine.yaml").write_text(
        "database:\n  backend: postgres\n  urlEnv: KLAW_TEST_URL_NOWHERE\n", encoding="utf-8"
    )
    env = {**_fake_systemctl(tmp_path, "exit 0"), "XDG_CONFIG_HOME": str(xdg)}
    for args in (("--copy-env",), ()):
        installed = klaw_here(home, "service", "install", *args, env=env)
        said = " ".join(installed.stdout.split())
        assert installed.returncode == 0, installed.stderr
        assert "KLAW_TEST_URL_NOWHERE (database.urlEnv), not set in this shell either" in said, said
        assert "--copy-env" not in said, said
        assert f"add them to {home / 'service.env'} as NAME=value lines: this shell has none of them" in said


def test_uninstall_stops_and_disables_the_service_before_removing_the_unit(tmp_path: Path) -> None:
    """Uninstall removed the unit and then said `run: systemctl --user disable --now klaw.service`, which
    fails once the unit is gone; now it disables it first, while the unit is there, then removes it.
    A stand-in systemctl on PATH records each call and whether the unit existed then."""
    import os

    home, xdg, bin_dir = tmp_path / "home", tmp_path / "xdg", tmp_path / "bin"
    unit = xdg / "systemd" / "user" / "klaw.service"
    calls = tmp_path / "calls"
    bin_dir.mkdir()
    fake = bin_dir / "systemctl"
    fake.write_text(f'#!/bin/sh\necho "$* unit:$(test -e {unit} && echo there || echo gone)" >> {calls}\n')
    fake.chmod(0o700)
    env = {"XDG_CONFIG_HOME": str(xdg), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    init_home(home)
    assert klaw_here(home, "service", "install", env=env).returncode == 0
    removed = klaw_here(home, "service", "uninstall", env=env)
    assert removed.returncode == 0, removed.stderr
    assert not unit.exists()
    assert calls.read_text().splitlines() == [
        "--user show-environment unit:there",  # install asks whether a user manager is there
        "--user disable --now klaw.service unit:there",
        "--user daemon-reload unit:gone",
    ]
    assert "stopped and disabled klaw.service, removed" in removed.stdout
    assert "run: systemctl" not in removed.stdout


def _fake_systemctl(tmp_path: Path, script: str) -> dict[str, str]:
    """A stand-in `systemctl` first on PATH (a CI container has no user manager to ask)."""
    import os

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "systemctl"
    fake.write_text(f"#!/bin/sh\n{script}\n")
    fake.chmod(0o700)
    return {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_without_a_reachable_user_manager_install_and_status_say_so_and_how_to_run_it(tmp_path: Path) -> None:
    """`service install` printed the systemctl commands as if they would work, and `service status` said only
    'systemd: Failed to connect to bus: No medium found' with exit 0 (newcomer9): both now name the cause and
    where it works; status exits 4 (installed, state unknown)."""
    home = tmp_path / "home"
    env = _fake_systemctl(tmp_path, 'echo "Failed to connect to bus: No medium found" >&2; exit 1')
    init_home(home)
    installed = klaw_here(home, "service", "install", env=env)
    assert installed.returncode == 0, installed.stderr
    said = " ".join(installed.stdout.split())
    assert "systemctl --user cannot reach your user's systemd here (Failed to connect to bus: No medium found)" in said
    assert "run 'klaw serve' under the container's own supervisor" in said
    # not "start it now and at every login" as if it would work here (newcomer20, decision 489)
    assert "start it now" not in said and "so nothing can start the unit from here" in said, said
    assert "Where your user's systemd runs (a login session on this machine): systemctl --user daemon-reload;" in said
    assert "run 'klaw serve' yourself or under its supervisor" in said
    status = klaw_here(home, "service", "status", env=env)
    assert status.returncode == 4, status.stdout + status.stderr
    assert f"(klaw serve for KLAW_HOME={home})" in status.stdout
    assert "cannot reach your user's systemd here" in " ".join(status.stdout.split())


def test_a_unit_that_refused_to_start_is_not_restarted_and_status_says_where_to_read_why(tmp_path: Path) -> None:
    """A missing token or a moved home exits 2 at every start: with Restart=on-failure alone systemd started it
    again every 5 s, forever (newcomer9). Exit 2 now ends it; status points at the journal."""
    home = tmp_path / "home"
    env = _fake_systemctl(tmp_path, 'case "$2" in is-active) echo failed; exit 3;; esac; exit 0')
    init_home(home)
    assert klaw_here(home, "service", "install", env=env).returncode == 0
    unit = (tmp_path / "xdg" / "systemd" / "user" / "klaw.service").read_text(encoding="utf-8")
    assert "Restart=on-failure" in unit and "RestartPreventExitStatus=2" in unit
    status = klaw_here(home, "service", "status", env=env)
    assert status.returncode == 0, status.stderr
    assert "systemd: failed" in status.stdout
    assert "why: journalctl --user -u klaw.service -n 20" in status.stdout
    # the refusal the service would repeat names where a service's token goes
    (home / "engine.yaml").write_text("channels:\n  telegram:\n    enabled: true\n", encoding="utf-8")
    refused = klaw(home, "serve", env={"KLAW_TELEGRAM_TOKEN": ""})
    assert refused.returncode == 2
    assert "reads it from KLAW_HOME/service.env" in " ".join(refused.stderr.split())


def test_uninstall_from_another_home_removes_nothing_and_names_the_home_it_serves(tmp_path: Path) -> None:
    """One unit name for every home: `service uninstall` run from home B removed the unit serving home A."""
    first, second = tmp_path / "a", tmp_path / "b"
    env = _fake_systemctl(tmp_path, "exit 0")
    for home in (first, second):
        init_home(home)
    assert klaw_here(first, "service", "install", env=env).returncode == 0
    unit = tmp_path / "xdg" / "systemd" / "user" / "klaw.service"
    status = klaw_here(second, "service", "status", env=env)
    assert f"(klaw serve for KLAW_HOME={first}, not this home)" in status.stdout
    refused = klaw_here(second, "service", "uninstall", env=env)
    assert refused.returncode == 2 and unit.exists()
    said = " ".join(refused.stderr.split())
    assert f"runs klaw serve for KLAW_HOME={first}, not for this home ({second}): nothing removed" in said
    assert f"KLAW_HOME={first} klaw service uninstall" in said
    assert klaw_here(first, "service", "uninstall", env=env).returncode == 0 and not unit.exists()


def test_a_home_path_with_systemd_specifiers_or_quotes_is_served_and_recognised(tmp_path: Path) -> None:
    """A home at `…/h%Z` was written into the unit as it is: systemd resolves `%` specifiers there, dropped
    the line ("Failed to resolve specifiers") and served ~/.klaw (adversary16). Now `%`, `"` and `\\` are
    escaped, status and uninstall read the home back, and a home deleted first can still be uninstalled."""
    home = tmp_path / 'h%Z "q" b\\s'
    env = _fake_systemctl(tmp_path, "exit 0")
    klaw_here(home, "init")
    assert klaw_here(home, "service", "install", env=env).returncode == 0
    unit = tmp_path / "xdg" / "systemd" / "user" / "klaw.service"
    text = unit.read_text(encoding="utf-8")
    assert 'Environment="KLAW_HOME=' + str(tmp_path) + '/h%%Z \\"q\\" b\\\\s"' in text
    assert "EnvironmentFile=-" + str(tmp_path) + '/h%%Z "q" b\\s/service.env' in text
    if shutil.which("systemd-analyze") is not None:
        verified = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
        assert "Failed to resolve specifiers" not in verified.stderr, verified.stderr
    status = klaw_here(home, "service", "status", env=env)
    assert f"(klaw serve for KLAW_HOME={home})" in status.stdout  # its own home, read back
    shutil.rmtree(home)
    removed = klaw_here(home, "service", "uninstall", env=env)
    assert removed.returncode == 0, removed.stderr
    assert not unit.exists()


async def test_a_home_another_klaw_process_holds_exits_75_which_the_unit_restarts(tmp_path: Path) -> None:
    """`klaw mcp serve` started while no engine runs holds the home; `klaw serve` (the service) exited 2, which
    the unit never restarts: an MCP client kept the service down for good (newcomer15). A home another klaw
    process holds is no mistake to fix: it exits 75 (EX_TEMPFAIL), which the unit restarts; 2 stays final
    (decision 435). The holder here is a program with `Klaw(home)` open (this test: one process fewer to
    start than a `klaw mcp serve`, whose hold is the same lock; its words are tests/cli/test_home_holder_words.py's)."""
    import asyncio
    import os

    from klaw import FunctionModel, Klaw
    from klaw.cli.service_cmd import unit_text
    from klaw.home import KlawHome
    from tests.test_library_agent_messages import CONFIG

    home = tmp_path / "home"
    async with Klaw(home, config=CONFIG, model=FunctionModel(lambda messages, info: "hello")):
        refused = await asyncio.to_thread(klaw, home, "serve")
    said = " ".join(refused.stderr.split())
    assert refused.returncode == 75, said
    assert f"(pid {os.getpid()}" in said and f"is running on {home}" in said and "Traceback" not in said

    unit = unit_text(KlawHome(home))
    settings = [line for line in unit.splitlines() if line and not line.startswith("#")]
    assert "Restart=on-failure" in settings and "RestartSec=5" in settings
    assert [line for line in settings if line.startswith("RestartPreventExitStatus=")] == ["RestartPreventExitStatus=2"]
    assert "another klaw process holds (klaw mcp serve, klaw chat) exits 75: restarted" in " ".join(
        line.lstrip("# ") for line in unit.splitlines()
    )
