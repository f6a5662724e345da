"""`klaw init`: create KLAW_HOME with a commented engine.yaml and the workspace files."""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from klaw.home import KlawHome
from klaw.home_language import LanguageSettings, apply_to_config_text
from klaw.private_files import private_dirs, write_private

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
    private_dirs(home.root)  # 0700, like every folder klaw makes (an existing home is make_private's)
    for directory in (home.workspace, home.skills_dir, home.conversations):
        if not directory.is_dir():
            report.made.append(directory)
        private_dirs(directory)
    for source, target in targets:
        if target.exists() and not overwrite:
            report.kept.append(target)
            continue
        text = source.read_text(encoding="utf-8")
        if language is not None and target == home.config_file:
            text = apply_to_config_text(text, language)
        write_private(target, text.encode("utf-8"))  # the workspace's prompt files too: klaw's, not the person's
        report.written.append(target)
    return report
