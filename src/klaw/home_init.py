"""`klaw init`: create KLAW_HOME with a commented engine.yaml and the workspace files."""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from klaw.home import KlawHome
from klaw.home_language import LanguageSettings, apply_to_config_text

WORKSPACE_FILES = ("SOUL.md", "IDENTITY.md", "AGENTS.md")


@dataclass
class InitReport:
    written: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)
    made: list[Path] = field(default_factory=list)  # directories created (workspace/skills/ among them)


def initialise_home(home: KlawHome, *, overwrite: bool = False, language: LanguageSettings | None = None) -> InitReport:
    """Write the default files that are missing (all of them with `overwrite`); never touch others.
    With `language`, engine.yaml carries its tokenizer, embedder and gates (klaw/home_language.py)."""
    templates = resources.files("klaw.templates")
    targets = [(templates / "engine.yaml", home.config_file)]
    targets += [(templates / "workspace" / name, home.workspace / name) for name in WORKSPACE_FILES]
    report = InitReport()
    home.root.mkdir(parents=True, exist_ok=True)
    home.root.chmod(0o700)  # conversations are private
    for directory in (home.workspace, home.skills_dir, home.conversations):
        if not directory.is_dir():
            report.made.append(directory)
        directory.mkdir(parents=True, exist_ok=True)
    for source, target in targets:
        if target.exists() and not overwrite:
            report.kept.append(target)
            continue
        text = source.read_text(encoding="utf-8")
        if language is not None and target == home.config_file:
            text = apply_to_config_text(text, language)
        target.write_text(text, encoding="utf-8")
        report.written.append(target)
    return report
