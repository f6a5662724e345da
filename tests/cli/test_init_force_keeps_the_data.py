"""`klaw init --force` on a home whose engine.yaml points at its data elsewhere than the defaults (a home moved
to PostgreSQL, another tokenizer or embedder): it used to write the defaults, so the home quietly went back to
the stale klaw.db (newcomer20, decision 489). It now refuses, naming each choice it would have changed."""

from __future__ import annotations

from pathlib import Path

from tests.cli.klaw_here import klaw_here
from tests.cli.test_reindex_cmd import a_home
from tests.conftest import new_database
from tests.pg_server import PgServer

VARIABLE = "KLAW_TEST_DATABASE_URL"


def _said(text: str) -> str:
    return " ".join(text.split())


def test_init_force_on_a_postgres_home_refuses_and_keeps_it_on_postgres(
    tmp_path: Path, postgres_server: PgServer
) -> None:
    home = a_home(tmp_path)
    assert klaw_here(home, "reindex").returncode == 0  # klaw.db, as a home that ran on SQLite has
    env = {VARIABLE: postgres_server.dsn(new_database(postgres_server))}
    moved = klaw_here(home, "db", "migrate", "--to", "postgres", "--url-env", VARIABLE, env=env)
    assert moved.returncode == 0, moved.stderr
    config = home / "engine.yaml"
    before = config.read_bytes()
    kept_copies = sorted(home.glob("engine.yaml.bak-*"))

    forced = klaw_here(home, "init", "--force", env=env)

    said = _said(forced.stderr)
    assert forced.returncode == 2, forced.stdout
    assert "database.backend: postgres (the defaults: sqlite)" in said, said
    assert f"database.urlEnv: {VARIABLE}" in said, said
    assert "embedder.backend: fake (the defaults: minilm)" in said, said
    assert "Nothing was changed" in said and f"mv {config} {config}.old" in said, said
    assert config.read_bytes() == before and sorted(home.glob("engine.yaml.bak-*")) == kept_copies
    info = klaw_here(home, "db", "info", env=env)
    assert info.returncode == 0 and "PostgreSQL" in info.stdout and "klaw.db" not in info.stdout.split("\n")[0]
    found = klaw_here(home, "memory", "search", "lighthouse", env=env)
    assert found.returncode == 0 and "lighthouse" in found.stdout, found.stderr


def test_init_force_keeps_going_when_the_data_choices_stay(tmp_path: Path) -> None:
    """The same language given again, or a home on the defaults: --force writes as before."""
    home = tmp_path / "ru"
    assert klaw_here(home, "init", "--language", "ru").returncode == 0
    again = klaw_here(home, "init", "--force", "--language", "ru")
    assert again.returncode == 0, again.stderr

    plain = klaw_here(home, "init", "--force")

    said = _said(plain.stderr)
    assert plain.returncode == 2, plain.stdout
    assert "database.tokenizer: unicode61 (the defaults: porter)" in said, said
    assert "embedder.backend: e5 (the defaults: minilm)" in said, said
    assert "--language" in said, said

    # another language, named on purpose: the index's choices change (reindex said), the database may not
    switched = klaw_here(home, "init", "--force", "--language", "zh")
    assert switched.returncode == 0, switched.stderr
    assert "run klaw reindex" in " ".join(switched.stdout.split())
    english = tmp_path / "en"  # PostgreSQL indexes English only: a home on it is an English one
    assert klaw_here(english, "init", "--language", "en").returncode == 0
    config = english / "engine.yaml"
    config.write_text(config.read_text(encoding="utf-8").replace("backend: sqlite", "backend: postgres\n  urlEnv: X"))
    moved = klaw_here(english, "init", "--force", "--language", "en")
    assert moved.returncode == 2 and "database.backend: postgres" in " ".join(moved.stderr.split())
    assert "database.tokenizer" not in moved.stderr, moved.stderr


# Decision 500: an engine.yaml that does not load cannot be compared (newc20a): --force set it aside as a .bak
# only, and a broken file naming PostgreSQL was reset to klaw.db unseen.
def test_init_force_sets_a_broken_engine_yaml_aside_and_says_why_it_did_not_load(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert klaw_here(home, "init").returncode == 0
    config = home / "engine.yaml"
    broken = config.read_text(encoding="utf-8") + "models: [\n"  # a YAML slip at the end
    config.write_text(broken, encoding="utf-8")

    forced = klaw_here(home, "init", "--force")

    assert forced.returncode == 0, forced.stderr
    aside = sorted(home.glob("engine.yaml.broken-*"))
    assert len(aside) == 1 and aside[0].read_text(encoding="utf-8") == broken
    assert aside[0].stat().st_mode & 0o777 == 0o600 and not list(home.glob("engine.yaml.bak-*"))
    said = _said(forced.stdout)
    assert f"saved {aside[0]} (your engine.yaml, which did not load:" in said and "line " in said, said
    assert klaw_here(home, "config", "check").returncode == 0  # the defaults, loading


def test_init_force_refuses_a_broken_engine_yaml_that_names_postgres(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert klaw_here(home, "init").returncode == 0
    config = home / "engine.yaml"
    config.write_text(f"database:\n  backend: postgres\n  urlEnv: {VARIABLE}\nbogus: 1\n", encoding="utf-8")
    before = config.read_bytes()

    forced = klaw_here(home, "init", "--force")

    said = _said(forced.stderr)
    assert forced.returncode == 2, forced.stdout
    assert f"{config} does not load (" in said and "bogus: unknown field" in said, said
    assert "line 2: backend: postgres; line 3: urlEnv: KLAW_TEST_DATABASE_URL" in said, said
    assert "Nothing was changed" in said and f"mv {config} {config}.old" in said, said
    assert config.read_bytes() == before and not list(home.glob("engine.yaml.broken-*"))
