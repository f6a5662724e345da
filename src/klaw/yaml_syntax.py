"""A YAML syntax error in engine.yaml said in words a person acts on, from what PyYAML's error marks say.

PyYAML reports where its parser gave up (`problem_mark`) in its own terms: an indentation slip (a key
indented 3 spaces among keys indented 2) read "at line 17, column 3: expected <block end>, but found
'<block mapping start>'", the line after the mistake, in parser jargon. Its "expected <block end>"
means exactly that the line's indentation fits no open block: it belongs neither to the section the
line above it is in, nor to the one around it. So that case names both lines and their indentations;
a tab (YAML indents with spaces) is named as one; anything else keeps PyYAML's words with the
position and what it was parsing (`context_mark`).

`BoundedSafeLoader` and `safe_load` are klaw's one way to read YAML: `yaml.safe_load` recurses once
per level of nesting (2 KB of `[` raise RecursionError) and lets ValueError, TypeError or
AttributeError out of its constructors (`when: 2020-13-45`, `n: !!int x`), neither of them a
`yaml.YAMLError` a caller expects. Here both come out as `yaml.YAMLError`s with a position (nesting
is refused at MAX_NESTING levels, before it costs a deep stack), so every caller's one `except
yaml.YAMLError` holds, and a skill's front matter, which a model can write, cannot break a turn.
Imports nothing of klaw.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from klaw.errors import KlawError

MAX_NESTING = 64  # levels of lists/mappings: far beyond any settings file or front matter


class YamlTooDeep(KlawError, yaml.MarkedYAMLError):
    """Nesting deeper than `MAX_NESTING` levels."""


class YamlBadValue(KlawError, yaml.MarkedYAMLError):
    """A scalar its tag (explicit or implied, like a date) cannot be built from."""


class BoundedSafeLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` with nesting bounded and its constructors' plain exceptions made YAMLErrors."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._nesting = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._nesting += 1
        try:
            if self._nesting > MAX_NESTING:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise YamlTooDeep(problem=f"nested more than {MAX_NESTING} levels deep", problem_mark=mark)
            return super().compose_node(parent, index)
        finally:
            self._nesting -= 1

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except yaml.YAMLError:
            raise
        except (ValueError, TypeError, AttributeError, ArithmeticError, RecursionError):
            kind = str(node.tag).rsplit(":", 1)[-1]  # the tag's short name: int, timestamp, ...
            raise YamlBadValue(problem=f"not a valid {kind}", problem_mark=node.start_mark) from None


def safe_load(text: str) -> Any:
    """`yaml.safe_load(text)`, but any failure to read it is a `yaml.YAMLError` (see the module's docstring)."""
    return load_with(BoundedSafeLoader(text))


def load_with(loader: BoundedSafeLoader) -> Any:
    """The single document `loader` (a BoundedSafeLoader or subclass) reads; the loader disposed."""
    try:
        return loader.get_single_data()
    except RecursionError:  # should MAX_NESTING not be reached first (a caller already deep in its stack)
        raise YamlTooDeep(problem="nested too deeply") from None
    finally:
        loader.dispose()


def syntax_message(text: str, error: yaml.YAMLError) -> str:
    """One sentence (without the file's name) saying where the YAML is wrong and how to fix it."""
    if isinstance(error, yaml.reader.ReaderError):  # before any parsing: PyYAML says only "position 1840"
        return _unprintable(text, error)
    mark = getattr(error, "problem_mark", None)
    problem = str(getattr(error, "problem", None) or "invalid YAML")
    if mark is None:
        return f"{problem}. Fix the YAML syntax."
    lines = EDITOR_BREAK.split(text)
    line, column = editor_place(text, mark.index)
    hidden = _hidden_break(text, mark.index)
    if problem.startswith("found character '\\t'") and not hidden:
        return f"line {line} has a tab character: YAML indents with spaces only. Replace the tab with spaces."
    if problem.startswith("expected <block end>") and not hidden:
        before = _content_line_before(lines, line - 1)
        if before is not None:
            this_indent = column - 1
            before_indent = _indent(lines[before])
            return (
                f"line {before + 1} or {line}: the indentation does not match the lines around it (line"
                f" {before + 1} is indented {_spaces(before_indent)}, line {line} {_spaces(this_indent)}). The"
                " keys of one section start in the same column (klaw init's file indents by 2 spaces)."
            )
    context = getattr(error, "context", None)
    context_mark = getattr(error, "context_mark", None)
    during = ""
    if context and context_mark:
        during = f" ({context} that starts at line {editor_place(text, context_mark.index)[0]})"
    return f"line {line}, column {column}: {problem}{during}. {hidden or 'Fix the YAML syntax there.'}"


EDITOR_BREAK = re.compile(r"\r\n|\r|\n")
"""The line breaks an editor shows; YAML also breaks lines at U+0085, U+2028 and U+2029 (`YAML_ONLY_BREAKS`)."""
YAML_ONLY_BREAKS = {"\x85": "NEXT LINE", "\u2028": "LINE SEPARATOR", "\u2029": "PARAGRAPH SEPARATOR"}
"""Line breaks to YAML (and PyYAML's error marks), none to an editor: a mark's line is past the one shown."""


def editor_place(text: str, index: int) -> tuple[int, int]:
    """The line and column (from 1) an editor shows for character `index` of `text`: PyYAML's marks count
    U+0085, U+2028 and U+2029 as line breaks too, so with one of them above, its line was past the one
    a person finds the mistake on (decision 515)."""
    before = text[:index]
    starts = [m.end() for m in EDITOR_BREAK.finditer(before)]
    start = starts[-1] if starts else 0
    return len(starts) + 1, index - start + 1


def mark_line(mark: Any) -> int:
    """A PyYAML mark's line as an editor shows it (the mark's own count when it holds no text)."""
    buffer = getattr(mark, "buffer", None)
    return editor_place(buffer, mark.index)[0] if isinstance(buffer, str) else int(mark.line) + 1


def _hidden_break(text: str, index: int) -> str:
    """What to say of the YAML-only line break nearest before `index` (the likeliest cause), "" for none."""
    found = [i for i, char in enumerate(text[:index]) if char in YAML_ONLY_BREAKS]
    if not found:
        return ""
    char = text[found[-1]]
    line, column = editor_place(text, found[-1])
    more = f" (and {len(found) - 1} more above it)" if len(found) > 1 else ""
    return (
        f"Line {line}, column {column} holds a U+{ord(char):04X} ({YAML_ONLY_BREAKS[char]}){more}, which YAML reads"
        " as a line break though an editor shows none (pasted from a web page or a word processor?): delete it,"
        " or retype the line."
    )


def _unprintable(text: str, error: yaml.reader.ReaderError) -> str:
    """A character YAML never allows (a control character: NUL, ESC, BEL, DEL, even in a comment), by line and
    column; PyYAML's own words give a character offset (decision 503)."""
    line, column = editor_place(text, error.position)
    code = error.character if isinstance(error.character, int) else ord(str(error.character)[:1] or "\0")
    return (
        f"line {line}, column {column}: a control character (U+{code:04X}) YAML does not allow anywhere, not even"
        " in a comment (pasted from a terminal?). Delete it, or retype the line."
    )


def _content_line_before(lines: list[str], index: int) -> int | None:
    """The index of the last line before `index` holding something (not blank, not only a comment)."""
    for i in range(min(index, len(lines)) - 1, -1, -1):
        stripped = lines[i].strip()
        if stripped and not stripped.startswith("#"):
            return i
    return None


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _spaces(count: int) -> str:
    return "1 space" if count == 1 else f"{count} spaces"
