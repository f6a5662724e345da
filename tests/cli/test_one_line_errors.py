"""What a person can get wrong around klaw's files ends in one clear line and a non-zero exit, never a
traceback: a klaw.db that is not a database (rebuilt by `klaw reindex`), sqlite-vec missing, an
engine.yaml that is not UTF-8 or is a directory, and klaw.db held by another process (the engine that
lost a start race)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import apsw
import pytest
from typer.testing import CliRunner

from klaw.cli.app import app
from tests.cli.test_cli import klaw

MISSING = "raise ModuleNotFoundError(\"No module named 'sqlite_vec'\", name='sqlite_vec')\n"
CONFIG = "embedder:\n  backend: fake\n  dim: 8\nchannels:\n  web:\n    port: 0\n"


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    said = " ".join(result.stderr.split())  # rich wraps long lines
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr
    assert said.startswith("error: ") and said.count("error: ") == 1, said
    return said


STARTS = {("engine",), ("serve",), ("chat",)}  # run as processes: on a regression they would run on, not end


def klaw_here_or_run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`klaw ARGS` on `home`: in this process (typer's CliRunner) for a command that ends by itself, the words
    being the point, a `klaw` process fewer each; a real process for those that start an engine or a chat."""
    if args in STARTS:
        return klaw(home, *args)
    result = CliRunner().invoke(app, list(args), env={"KLAW_HOME": str(home), "COLUMNS": "200"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception  # a traceback
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "engine.yaml").write_text(CONFIG, encoding="utf-8")
    (home / "engine.yaml").chmod(0o600)
    return home


@pytest.mark.parametrize("command", [("engine",), ("serve",), ("db", "info"), ("memory", "search", "x")], ids=" ".join)
def test_a_klaw_db_that_is_not_a_database_says_to_rebuild_it(home: Path, command: tuple[str, ...]) -> None:
    (home / "klaw.db").write_bytes(b"these bytes were never an SQLite file " * 200)
    (home / "klaw.db").chmod(0o600)
    said = one_line_error(klaw(home, *command))
    assert f"{home / 'klaw.db'} is not a klaw database or is damaged" in said
    assert "run 'klaw reindex' to rebuild it" in said


def test_sqlite_vec_not_installed_is_one_line(home: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()  # the package absent, as Python sees it however klaw looks (an import or find_spec)
    (site / "sitecustomize.py").write_text(
        "import sys\n"
        "class Absent:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'sqlite_vec' or name.startswith('sqlite_vec.'):\n"
        "            raise ModuleNotFoundError(\"No module named 'sqlite_vec'\", name='sqlite_vec')\n"
        "sys.meta_path.insert(0, Absent())\n"
    )
    said = one_line_error(klaw(home, "engine", env={"PYTHONPATH": str(site)}))
    assert "sqlite-vec is not installed" in said and "pip install sqlite-vec" in said


def test_an_engine_yaml_that_is_not_utf8_is_one_line(home: Path) -> None:
    (home / "engine.yaml").write_bytes(b"embedder:\n  backend: fake # caf\xe9\n")
    for command in (("engine",), ("config", "check")):
        said = one_line_error(klaw(home, *command))
        assert "engine.yaml is not UTF-8 text" in said and "save it as UTF-8" in said


@pytest.mark.parametrize(("char", "name"), [(b"\x00", "0000"), (b"\x1b", "001B"), (b"\x07", "0007"), (b"\x7f", "007F")])
def test_a_control_character_in_engine_yaml_is_named_by_line_and_column(home: Path, char: bytes, name: str) -> None:
    """adversary29 (decision 503): a NUL, ESC, BEL or DEL in engine.yaml, even in a comment, gave a 25-line
    traceback ending in PyYAML's "unacceptable character #x0000 … position 1840" from every command, exit 1."""
    (home / "engine.yaml").write_bytes(b"embedder:\n  backend: fake\n# pasted " + char + b" here\n")
    for command in (("engine",), ("config", "check"), ("db", "info")):
        result = klaw(home, *command)
        assert result.returncode == 2, (command, result.stderr)
        said = one_line_error(result)
        assert f"engine.yaml line 3, column 10: a control character (U+{name})" in said, said
        assert "not even in a comment" in said and "Delete it" in said


@pytest.mark.parametrize(("char", "name"), [("\u2028", "U+2028 (LINE SEPARATOR)"), ("\x85", "U+0085 (NEXT LINE)")])
def test_a_line_break_only_yaml_sees_is_named_on_the_line_an_editor_shows(home: Path, char: str, name: str) -> None:
    """adversary30 (decision 515): U+2028 or U+0085 pasted into a value on line 8 gave "line 10, column 3:
    could not find expected ':'" while an editor showed lines 9 and 10 fine: YAML counts those as line breaks. The
    error is now placed where an editor shows it, and the character is named by its line and column."""
    lines = [*CONFIG.splitlines(), "tools:", f"  approval: [host_exec]{char}  file_write", "  allowPromptEdits: false"]
    (home / "engine.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for command in (("config", "check"), ("db", "info")):
        result = klaw_here_or_run(home, *command)
        assert result.returncode == 2, (command, result.stderr)
        said = one_line_error(result)
        assert "engine.yaml line 9, column 3: could not find expected ':'" in said, said
        assert f"Line 8, column 24 holds a {name}, which YAML reads as a line break though an editor shows" in said
        assert "delete it" in said


def test_a_repeated_key_is_named_on_the_line_an_editor_shows(home: Path) -> None:
    """The repeated-key message's lines are an editor's too, with a U+2028 in a quoted value above them."""
    text = CONFIG + 'tools:\n  approval: [host_exec]\nmemory:\n  note: "a\u2028b"\ntools:\n  allowPromptEdits: false\n'
    (home / "engine.yaml").write_text(text, encoding="utf-8")
    said = one_line_error(klaw_here_or_run(home, "config", "check"))
    assert "engine.yaml line 11: 'tools' is already set at line 7" in said, said


def test_an_engine_yaml_that_is_a_directory_is_one_line(home: Path) -> None:
    (home / "engine.yaml").unlink()
    (home / "engine.yaml").mkdir(mode=0o700)
    for command in (("engine",), ("config", "show")):
        said = one_line_error(klaw(home, *command))
        assert "engine.yaml is a directory; engine.yaml must be a file" in said


def test_klaw_db_held_by_another_process_is_one_line(home: Path) -> None:
    """Another engine holds the database while it starts (here: an exclusive transaction on a database
    not yet in WAL mode, as a fresh one is while the first engine creates it); the second waits SQLite's
    5 s busy timeout, then says who holds it."""
    umask = os.umask(0o077)  # created as klaw creates files: the warning about modes is not under test
    try:
        holder = apsw.Connection(str(home / "klaw.db"))
        holder.execute("CREATE TABLE t(x); BEGIN EXCLUSIVE; INSERT INTO t VALUES (1)")
    finally:
        os.umask(umask)
    try:
        said = one_line_error(klaw(home, "engine"))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert "is in use by another klaw process" in said
    assert not (home / "engine.sock").exists()


def test_the_cli_starts_without_sqlite_vec_for_commands_that_do_not_need_it(home: Path, tmp_path: Path) -> None:
    site = tmp_path / "site" / "sqlite_vec"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'sqlite_vec'\", name='sqlite_vec')\n"
    )
    env = {**os.environ, "KLAW_HOME": str(home), "PYTHONPATH": str(tmp_path / "site")}
    result = subprocess.run(
        [sys.executable, "-m", "klaw", "config", "check"], capture_output=True, text=True, env=env, timeout=60
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    "command",
    [
        ("engine",),
        ("serve",),
        ("chat",),
        ("schedule", "add", "x", "--every", "1h", "-m", "hi"),
        ("schedule", "list"),
        ("log", "check"),
        ("memory", "list"),
        ("config", "show"),
        ("db", "info"),
    ],
    ids=" ".join,
)
def test_a_mistyped_klaw_home_is_named_not_created(tmp_path: Path, command: tuple[str, ...]) -> None:
    """An engine started on a path that is not a home used to create an empty one there and run on
    defaults: to the person, a klaw that had forgotten everything. The other commands answered for an
    empty home ("No scheduled tasks.", nothing to check) or made its folder for a scheduler.db."""
    typo = tmp_path / "hmoe"
    said = one_line_error(klaw_here_or_run(typo, *command))
    assert f"There is no klaw home at {typo} (KLAW_HOME={typo})" in said
    assert "klaw init" in said
    assert not typo.exists()


@pytest.mark.parametrize(
    "command", [("init",), ("chat",), ("schedule", "add", "x", "--every", "1h", "-m", "hi")], ids=" ".join
)
def test_a_klaw_home_that_is_a_file_is_named(tmp_path: Path, command: tuple[str, ...]) -> None:
    """KLAW_HOME pointing at engine.yaml itself: `klaw init` and `schedule add` ended in FileExistsError."""
    path = tmp_path / "engine.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    said = one_line_error(klaw_here_or_run(path, *command))
    assert f"{path} is a file, not a klaw home (KLAW_HOME={path}): point KLAW_HOME at a folder." in said


def test_klaw_init_where_no_folder_can_be_made_is_one_line(tmp_path: Path) -> None:
    """Under /proc nothing can be created (whoever runs the test, root included): FileNotFoundError."""
    said = one_line_error(klaw(Path("/proc/klaw-home-test"), "init"))
    assert "Could not create a klaw home at /proc/klaw-home-test:" in said


def test_ctrl_c_while_klaw_starts_is_not_a_traceback() -> None:
    """A real SIGINT while the command line's modules are importing: the process ends as interrupted,
    never with a traceback out of an import. `-X importtime` says when typer (the first thing
    cli/app.py imports) has loaded, so the signal lands in klaw's imports, not in Python's own start-up
    (a fixed delay did that on a loaded machine) and not after the command ran."""
    env = {**os.environ, "COLUMNS": "200"}
    process = subprocess.Popen(
        [sys.executable, "-X", "importtime", "-m", "klaw", "--help"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stderr is not None
    seen = []
    for line in process.stderr:
        seen.append(line)
        if line.startswith("import time:") and line.rsplit("|", 1)[1].strip() == "typer":
            process.send_signal(signal.SIGINT)
            break
    rest = process.communicate(timeout=60)[1]
    said = "".join(seen) + rest
    assert "Traceback" not in said and "KeyboardInterrupt" not in said, said[-1500:]
    # 130 as a shell reports an interrupt; on a machine so loaded that the imports finished before the
    # signal came, click's "Aborted!" (1) or the help page (0): never a traceback either way.
    assert process.returncode in (130, 1, 0), process.returncode


def test_klaw_serve_on_a_port_in_use_names_the_port_and_the_setting(home: Path) -> None:
    """It said "the gateway could not start: [Errno 98] Address already in use", naming neither."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        said = one_line_error(klaw(home, "serve", env={"KLAW__CHANNELS__WEB__PORT": str(port)}))
    assert f"the web page cannot listen on 127.0.0.1:{port} (Address already in use)" in said
    assert "channels.web.port" in said


def test_an_error_into_a_pipe_stays_one_line_whatever_its_length(tmp_path: Path) -> None:
    """rich wrapped stderr at 80 columns when it was not a terminal (a service's journal, a script),
    breaking a sentence mid-way; a line into a pipe is now whole."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["KLAW_HOME"] = str(tmp_path / "no-home-here")
    command = [sys.executable, "-m", "klaw", "memory", "search", "anything"]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
    said = one_line_error(result)
    assert len(said) > 100 and result.stderr == said + "\n"
