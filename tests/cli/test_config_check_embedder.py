"""`klaw config check` on a home whose stored vectors come from another embedder than engine.yaml now
names: before, it said "valid" and the engine then refused to start. It now says what the engine says
(one wording, store/protocol.py's `embedder_mismatch`) and the fix, `klaw reindex`."""

from __future__ import annotations

from pathlib import Path

from tests.cli.klaw_here import klaw_here
from tests.cli.test_cli import klaw
from tests.cli.test_reindex_cmd import a_home

REFUSAL = (
    "vec_messages holds 6 vectors from embedder 'fake-hash-32' (dim 32), but the configured embedder is"
    " 'fake-hash-16' (dim 16). Vectors of different models cannot be mixed: run 'klaw reindex' to re-embed"
    " with the configured embedder, or set the embedder back in engine.yaml."
)


def test_config_check_says_a_switched_embedder_needs_klaw_reindex_as_the_engine_does(tmp_path: Path) -> None:
    home = a_home(tmp_path)  # six messages in the log, embedder fake at 32 dimensions
    assert klaw_here(home, "reindex").returncode == 0  # their vectors stored
    assert klaw_here(home, "config", "check").returncode == 0
    (home / "engine.yaml").write_text("embedder:\n  backend: fake\n  dim: 16\n", encoding="utf-8")
    checked = klaw_here(home, "config", "check")
    said = " ".join(checked.stderr.split())
    assert checked.returncode == 1 and "valid" not in checked.stdout, said
    assert f"engine.yaml is valid, but the engine will not start on this home: {REFUSAL}" in said, said
    engine = klaw(home, "engine")  # the engine's own start refuses with the same sentence
    assert engine.returncode != 0 and REFUSAL in " ".join(engine.stderr.split()), engine.stderr
    assert klaw_here(home, "reindex").returncode == 0  # the fix it names
    assert klaw_here(home, "config", "check").returncode == 0
