"""The user docs that ship with klaw: where they are, their pages, and their sections.

The wheel carries the repository's `docs/` as the package directory `klaw/docs` (pyproject.toml's
wheel `sources`), without `docs/decisions/` (design decisions, for developers), so an installed klaw
has them wherever it was installed; they are read with `importlib.resources`. In a source checkout
(an editable install) `src/klaw/docs` does not exist and the repository's `docs/` is read instead,
without `decisions/` too. Pages are Markdown files named by their path relative to the docs root
(`memory/forgetting.md`), the only names `docs_read` accepts, so no path a model sends can reach
any other file. Decision: docs/decisions/113-docs-tools.md.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

EXCLUDED_DIRS = frozenset({"decisions"})  # design decisions: not user docs
SECTION_CHARS = 1500  # a section longer than this is indexed in pieces, split at paragraphs
_HEADING = re.compile(r"^(#{1,3})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^(```|~~~)")


@dataclass(frozen=True)
class DocSection:
    """One indexed piece of a page: its path, the heading it sits under as shown ("page title — section
    heading"), and its text; `title` and `own` are the two parts of that heading, which the index weighs
    apart (the page's title is every section's, so it tells the page, not the section: decision 431)."""

    path: str
    heading: str
    text: str
    title: str = ""
    own: str = ""


class DocsBundle:
    """The docs under one root: the packaged `klaw/docs`, the checkout's `docs/`, or any folder (tests)."""

    def __init__(self, root: Traversable | Path) -> None:
        self.root = root
        self._pages: dict[str, Traversable] | None = None

    @classmethod
    def shipped(cls) -> DocsBundle:
        """The docs of this klaw: inside the installed package, else the source checkout's."""
        packaged = resources.files("klaw") / "docs"
        if packaged.is_dir():
            return cls(packaged)
        checkout = Path(__file__).resolve().parents[4] / "docs"
        return cls(checkout)

    def pages(self) -> dict[str, Traversable]:
        """Relative path → file, sorted; Markdown only, decisions and hidden files left out."""
        if self._pages is None:
            found: dict[str, Traversable] = {}
            if self.root.is_dir():
                _walk(self.root, "", found)
            self._pages = dict(sorted(found.items()))
        return self._pages

    def read(self, path: str) -> str:
        """A page's text; a name that is not one of `pages()` raises KeyError (never a file lookup)."""
        normalised = path.strip().lstrip("./").removeprefix("docs/")
        return self.pages()[normalised].read_text(encoding="utf-8")

    def title(self, path: str) -> str:
        for line in self.read(path).splitlines():
            match = _HEADING.match(line)
            if match and len(match.group(1)) == 1:
                return match.group(2)
        return path

    def fingerprint(self) -> str:
        """A hash of every page's path and text: the index is rebuilt when it changes."""
        digest = hashlib.sha256()
        for path in self.pages():
            digest.update(path.encode() + b"\0" + self.read(path).encode() + b"\0")
        return digest.hexdigest()

    def sections(self) -> list[DocSection]:
        """Every page cut at its headings (levels 1-3, not inside code fences), long sections at paragraphs."""
        found: list[DocSection] = []
        for path in self.pages():
            title = self.title(path)
            for heading, text in _split_at_headings(self.read(path)):
                own = "" if heading in ("", title) else heading
                label = f"{title} — {own}" if own else title
                for piece in _pieces(text):
                    found.append(DocSection(path, label, piece, title, own))
        return found


def _walk(folder: Traversable, prefix: str, found: dict[str, Traversable]) -> None:
    for entry in folder.iterdir():
        if entry.name.startswith("."):
            continue
        relative = f"{prefix}{entry.name}"
        if entry.is_dir():
            if not (prefix == "" and entry.name in EXCLUDED_DIRS):
                _walk(entry, relative + "/", found)
        elif entry.name.endswith(".md"):
            found[relative] = entry


def _split_at_headings(text: str) -> list[tuple[str, str]]:
    parts: list[tuple[str, list[str]]] = [("", [])]
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line.strip()):
            fenced = not fenced
        match = None if fenced else _HEADING.match(line)
        if match:
            parts.append((match.group(2), []))
        else:
            parts[-1][1].append(line)
    return [(heading, "\n".join(lines).strip()) for heading, lines in parts if "\n".join(lines).strip()]


def _pieces(text: str) -> list[str]:
    if len(text) <= SECTION_CHARS:
        return [text]
    pieces: list[str] = []
    current = ""
    for paragraph in text.split("\n\n"):
        if current and len(current) + len(paragraph) > SECTION_CHARS:
            pieces.append(current)
            current = ""
        current = f"{current}\n\n{paragraph}" if current else paragraph
    if current:
        pieces.append(current)
    return pieces
