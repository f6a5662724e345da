"""`klaw init`: create KLAW_HOME with a commented engine.yaml and the workspace files."""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Literal

from klaw.atomic_file import kept_copy_name
from klaw.home import SKILLS_FOLDER, KlawHome
from klaw.home_language import LanguageSettings, apply_to_config_text
from klaw.private_files import private_dirs, write_private

WORKSPACE_FILES = ("SOUL.md", "IDENTITY.md", "AGENTS.md")
# What tools may not change unless `tools.allowPromptEdits`: the prompt files and the skills folder (a
# name ending in "/"), all of which go into every turn of every chat (decision 279).
PROTECTED_WORKSPACE = (*WORKSPACE_FILES, f"{SKILLS_FOLDER}/")


@dataclass
class InitReport:
    written: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)
    made: list[Path] = field(default_factory=list)  # directories created (workspace/skills/ among them)
    saved: list[Path] = field(default_factory=list)  # the person's files `overwrite` replaced, kept beside them
    # Everything above in the order it happened, each folder before what it holds: what `klaw init` prints.
    steps: list[tuple[Literal["wrote", "made", "kept", "saved"], Path]] = field(default_factory=list)


def initialise_home(
    home: KlawHome, *, overwrite: bool = False, language: LanguageSettings | None = None, broken: bool = False
) -> InitReport:
    """Write the default files that are missing (all of them with `overwrite`, each one that differs first
    copied beside it as `<name>.bak-<UTC time>`); never touch others.
    With `language`, engine.yaml carries its tokenizer, embedder and gates (klaw/home_language.py).
    `broken`: engine.yaml does not load; its copy is named `engine.yaml.broken-<UTC time>` (decision 500)."""
    templates = resources.files("klaw.templates")
    report = InitReport()
    private_dirs(home.root)  # 0700, like every folder klaw makes (an existing home is make_private's)
    config_text = (templates / "engine.yaml").read_text(encoding="utf-8")
    if language is not None:
        config_text = apply_to_config_text(config_text, language)
    _write(report, home.config_file, config_text, overwrite, "broken" if broken else "bak")
    _make(report, home.workspace)
    for name in WORKSPACE_FILES:
        _write(report, home.workspace / name, (templates / "workspace" / name).read_text(encoding="utf-8"), overwrite)
    _make(report, home.skills_dir)
    _make(report, home.conversations)
    return report


def _make(report: InitReport, directory: Path) -> None:
    if not directory.is_dir():
        report.made.append(directory)
        report.steps.append(("made", directory))
    private_dirs(directory)


def _write(report: InitReport, target: Path, text: str, overwrite: bool, kind: str = "bak") -> None:
    if target.exists() and not overwrite:
        report.kept.append(target)
        report.steps.append(("kept", target))
        return
    data = text.encode("utf-8")
    if target.exists() and target.read_bytes() != data:  # `--force` on a file the person edited: keep theirs
        saved = kept_copy_name(target, kind)
        write_private(saved, target.read_bytes())
        report.saved.append(saved)
        report.steps.append(("saved", saved))
    write_private(target, data)  # the workspace's prompt files too: klaw's, not the person's
    report.written.append(target)
    report.steps.append(("wrote", target))
