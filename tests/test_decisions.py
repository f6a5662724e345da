"""The decisions the code cites live in the repository (docs/decisions/), and every citation resolves.

The earlier design notes klaw was created from do not ship with it, so no file may point at them
(a path out of the repository, the design page, a numbered note); it cites a decision file instead,
and that file must exist.
"""

from __future__ import annotations

import re
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DECISIONS = REPO / "docs" / "decisions"
# Built from parts so this file does not match itself.
OUTSIDE = re.compile("|".join([r"\.\./" + "shared", "DESIGN" + r"\.md", "spec" + r" 00\d", "shared/" + "spec"]))
CITATION = re.compile(r"docs/decisions/(\d{3})([\w-]*\.md)?")
TEXT_SUFFIXES = {".py", ".md", ".toml", ".yaml", ".yml", ".sql", ".sh", ".txt", ".js", ".html", ".css", ".cfg"}


def _repository_texts() -> list[Path]:
    roots = [REPO / "src", REPO / "tests", REPO / "docs", REPO / "scripts"]
    files = [p for root in roots for p in root.rglob("*") if p.is_file() and p.suffix in TEXT_SUFFIXES]
    files += [p for p in REPO.glob("*") if p.is_file() and p.suffix in TEXT_SUFFIXES]
    return sorted(p for p in files if "__pycache__" not in p.parts and ".venv" not in p.parts)


def test_no_file_points_outside_the_repository() -> None:
    offenders = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in _repository_texts()
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not offenders, (
        "These lines cite design notes that do not ship with klaw; write the decision as a short "
        "docs/decisions/NNN-short-name.md (context, decision, why, consequences) and cite that:\n"
        + "\n".join(offenders)
    )


def test_every_cited_decision_exists() -> None:
    present = {p.name for p in DECISIONS.glob("*.md")}
    missing = []
    for path in _repository_texts():
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for match in CITATION.finditer(line):
                prefix, rest = match.groups()
                found = f"{prefix}{rest}" in present if rest else any(n.startswith(prefix) for n in present)
                if not found:
                    missing.append(f"{path.relative_to(REPO)}:{number}: {match.group(0)}")
    assert not missing, "These citations name no file in docs/decisions/:\n" + "\n".join(missing)


def test_every_decision_has_a_number_of_its_own() -> None:
    """Work landed side by side once gave two decisions the same number; a citation by number is then ambiguous."""
    numbers: dict[str, list[str]] = {}
    for path in DECISIONS.glob("*.md"):
        if re.match(r"\d{3}-", path.name):
            numbers.setdefault(path.name[:3], []).append(path.name)
    shared = {number: names for number, names in numbers.items() if len(names) > 1}
    assert not shared, f"decisions sharing a number (give each its own): {shared}"


PRIVATE_NAME = re.compile(r"`(_[A-Z]\w*)(?:\.\w+)*`")
STDLIB = Path(sysconfig.get_paths()["stdlib"])


def _defined(name: str, roots: list[Path]) -> bool:
    definition = re.compile(rf"^\s*(class|def) {re.escape(name)}\b|^{re.escape(name)}\s*[:=]", re.MULTILINE)
    return any(definition.search(p.read_text(errors="replace")) for root in roots for p in root.rglob("*.py"))


def test_a_private_name_a_decision_cites_exists_or_a_note_says_where_it_went() -> None:
    """Decisions 220, 262 and 264 named `_ChatReply` in engine/processor.py long after it had become
    `ChatReply` in engine/chat_reply.py: a reader looking for it found nothing. History is not rewritten;
    a note line naming the old name beside its new one (`now `...) keeps the citation followable."""
    stale = []
    for path in sorted(DECISIONS.glob("*.md")):
        text = path.read_text()
        noted = {name for line in text.splitlines() if "now `" in line for name in PRIVATE_NAME.findall(line)}
        for name in sorted(set(PRIVATE_NAME.findall(text)) - noted):
            if not _defined(name, [REPO / "src"]) and not _defined(name, [STDLIB / "concurrent"]):
                stale.append(f"{path.name}: `{name}`")
    assert not stale, (
        "These decisions name a private class or function that src/ no longer defines; add a line"
        " 'Note (later): `_Old` named here is now `New` in src/klaw/…' (history stays as written):\n" + "\n".join(stale)
    )
