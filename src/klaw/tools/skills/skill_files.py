"""One skill folder read and checked: its `SKILL.md` front matter, its size, and its paths.

The agent-skills convention: `workspace/skills/<name>/SKILL.md` opens with YAML front matter between
`---` lines giving `name` (lowercase letters, digits and single hyphens, at most 64 characters, the
folder's own name) and `description` (what the skill is for and when to use it, at most 1024
characters); other keys (`license`, `metadata`, ...) are allowed and ignored. The body is the
instructions; it may refer to other files of the folder by relative links.

Everything the agent may read must lie inside the skill's folder once symlinks are resolved: a
folder, `SKILL.md`, a linked file or any file of the folder that leads elsewhere is a problem, and
`read_confined` refuses it at read time too, opening beneath the folder's descriptor so that a swap
between a check and a read cannot lead out (decision 243).
Problems name the file and the rule, never the file's content. Decision: docs/decisions/112-skills.md.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal

import yaml

from klaw.command_syntax import COMMAND_NAMES
from klaw.errors import KlawError
from klaw.tools.beneath import open_directory, walk
from klaw.yaml_syntax import MAX_NESTING, YamlBadValue, YamlTooDeep, safe_load

SKILL_FILE = "SKILL.md"
NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024
MAX_FILES = 200  # files listed per skill: a skill is a few instructions, not a tree to crawl
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)^---[ \t]*\r?$\n?", re.S | re.M)
_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")  # [text](target "title") and ![alt](...)
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
_USER_INVOCABLE = "user-invocable"  # false: the agent may use the skill, a person may not call it by /name (529)

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    """What is wrong with a skill: `path` (relative to the skills folder) and the rule it breaks. An
    error leaves the skill out; a warning (a link to a file that does not exist) does not."""

    path: str
    reason: str
    severity: Severity = "error"

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    folder: Path  # resolved: inside the resolved skills folder
    files: tuple[str, ...] = ()  # the folder's files other than SKILL.md, relative, '/'-separated
    user_invocable: bool = True  # `/name args` calls it (decision 529); front matter's `user-invocable: false`

    @property
    def summary(self) -> str:
        """The description on one line, for the context layer."""
        return " ".join(self.description.split())


@dataclass(frozen=True)
class SkillCheck:
    """One folder's outcome: the skill (None when an error leaves it out) and every problem found."""

    folder_name: str
    skill: Skill | None
    problems: list[Problem] = field(default_factory=list)


class SkillPathError(KlawError, ValueError):
    """A path a skill may not be read at (outside its folder, missing, not a file, too large);
    `escapes` when it leads outside the folder (a missing file is merely absent)."""

    def __init__(self, message: str, *, escapes: bool = False) -> None:
        super().__init__(message)
        self.escapes = escapes


def check_skill(folder: Path, skills_root: Path, *, max_bytes: int) -> SkillCheck:
    """Read and check `folder` (an entry of the skills folder `skills_root`, already resolved)."""
    label = folder.name
    problems: list[Problem] = []

    def fail(reason: str, where: str = label) -> SkillCheck:
        problems.append(Problem(where, reason))
        return SkillCheck(label, None, problems)

    resolved = folder.resolve()
    if not resolved.is_relative_to(skills_root) or resolved == skills_root:
        return fail("is a symlink leading outside the skills folder")
    where = f"{label}/{SKILL_FILE}"
    try:
        text = read_confined(resolved, SKILL_FILE, max_bytes=max_bytes)
    except SkillPathError as exc:
        return fail(str(exc), where)
    front, body = split_front_matter(text)
    if front is None:
        return fail("does not start with YAML front matter between '---' lines (name, description)", where)
    fields, errors = parse_front_matter(front)
    problems += [Problem(where, error) for error in errors]  # every one, not the first alone
    name, description, invocable = fields
    if name and name != label:
        problems.append(
            Problem(where, f"name {name!r} is not the folder's name {label!r} (they must match, so names are unique)")
        )
    files, walk_problems = _list_files(resolved, label, max_bytes)
    problems += walk_problems
    problems += _link_problems(body, resolved, label)
    if label in COMMAND_NAMES:
        problems.append(Problem(where, shadowed(label), "warning"))
    if invocable and (skipped := _placeholder_out_of_order(body)) is not None:
        problems.append(Problem(where, skipped, "warning"))
    if any(p.severity == "error" for p in problems):
        return SkillCheck(label, None, problems)
    return SkillCheck(label, Skill(name, description, resolved, files, invocable), problems)


def split_front_matter(text: str) -> tuple[str | None, str]:
    """(front matter, body), or (None, text) when the file does not open with a `---` block."""
    match = _FRONT_MATTER.match(text.lstrip("\ufeff"))
    if match is None:
        return None, text
    return match.group(1), text.lstrip("\ufeff")[match.end() :]


def parse_front_matter(front: str) -> tuple[tuple[str, str, bool], list[str]]:
    """((name, description, user-invocable), []), or the fields that passed ("" for one that did not) and each
    thing wrong, so a skill's check names them all at once: the rule, never the content."""
    try:
        data = safe_load(front)  # nesting bounded, every failure a YAMLError (klaw/yaml_syntax.py)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2}, column {mark.column + 1})" if mark is not None else ""
        if isinstance(exc, YamlTooDeep):
            deep = f"front matter nested too deeply{where}: lists or mappings more than {MAX_NESTING} levels"
            return ("", "", True), [deep]
        problem = getattr(exc, "problem", None) if isinstance(exc, YamlBadValue) else None
        return ("", "", True), [f"front matter is not valid YAML{where}" + (f": {problem}" if problem else "")]
    if not isinstance(data, dict):
        return ("", "", True), ["front matter must be a mapping with name and description"]
    name, description = data.get("name"), data.get("description")
    errors = []
    if not isinstance(name, str) or not name:
        errors.append("front matter has no name (a string)")
        name = ""
    elif len(name) > MAX_NAME_CHARS or not NAME.match(name):
        errors.append(f"name must be 1-{MAX_NAME_CHARS} lowercase letters, digits and single hyphens (like pdf-forms)")
        name = ""
    if not isinstance(description, str) or not description.strip():
        errors.append("front matter has no description (a string saying what the skill is for and when)")
        description = ""
    elif len(description) > MAX_DESCRIPTION_CHARS:
        errors.append(f"description is longer than {MAX_DESCRIPTION_CHARS} characters")
    invocable = data.get(_USER_INVOCABLE, True)
    if not isinstance(invocable, bool):
        errors.append(f"{_USER_INVOCABLE} must be true or false (false: only the agent uses the skill, /name refuses)")
        invocable = True
    return (name, description.strip(), invocable), errors


def confined_file(folder: Path, relative: str) -> None:
    """Nothing when `relative` names an existing regular file inside the skill's (resolved) `folder`,
    symlinks followed; raises SkillPathError when it is absolute, leads outside the folder, or is not
    an existing regular file."""
    os.close(_open_confined(folder, relative))


def read_confined(folder: Path, relative: str, *, max_bytes: int) -> str:
    """The UTF-8 text of a file of the skill, refused beyond `max_bytes` (checked before reading).

    The file is opened beneath a descriptor of the folder (klaw/tools/beneath.py) and read through
    that descriptor: code swapping a folder of the skill for a symlink meanwhile cannot lead the read
    outside (decision 243)."""
    fd = _open_confined(folder, relative)
    with os.fdopen(fd, "rb") as file:
        size = os.fstat(fd).st_size
        if size > max_bytes:
            raise SkillPathError(f"{relative!r} is {size} bytes, more than the {max_bytes} a skill file may hold")
        try:
            return file.read(max_bytes + 1)[:max_bytes].decode("utf-8")
        except UnicodeDecodeError:
            raise SkillPathError(f"{relative!r} is not UTF-8 text") from None
        except OSError as exc:
            raise SkillPathError(f"{relative!r} cannot be read ({exc.strerror or type(exc).__name__})") from None


def _open_confined(folder: Path, relative: str) -> int:
    """A descriptor of the regular file `relative` names beneath `folder`, or SkillPathError."""
    pure = PurePosixPath(relative.replace("\\", "/"))
    if not relative.strip() or pure.is_absolute() or relative.startswith("~"):
        raise SkillPathError(f"{relative!r} is not a path relative to the skill's folder", escapes=True)
    try:
        root = open_directory(folder)
    except OSError:
        raise SkillPathError(f"the skill's folder changed while {relative!r} was read; try again") from None
    try:
        found = walk(root, folder, str(pure))
        try:
            fd = found.open(os.O_RDONLY | os.O_NONBLOCK)
        finally:
            found.close()
    except PermissionError as exc:
        if exc.errno is None:  # the walk's own refusal: the path or a symlink on it leads out
            raise SkillPathError(f"{relative!r} leads outside the skill's folder", escapes=True) from None
        raise SkillPathError(f"{relative!r} cannot be read ({exc.strerror})") from None
    except (FileNotFoundError, NotADirectoryError):
        raise SkillPathError(f"{relative!r} does not exist in the skill") from None
    except OSError as exc:
        raise SkillPathError(f"{relative!r} cannot be read ({exc.strerror or type(exc).__name__})") from None
    finally:
        os.close(root)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise SkillPathError(f"{relative!r} is not a regular file")
    os.set_blocking(fd, True)
    return fd


def _list_files(folder: Path, label: str, max_bytes: int) -> tuple[tuple[str, ...], list[Problem]]:
    """The folder's files (hidden ones skipped), and problems: a symlink leading outside or in a loop
    (`a -> b -> a`: Python 3.11's `resolve` raises RuntimeError on it, which left out every skill), a file
    too large, more than MAX_FILES."""
    files: list[str] = []
    problems: list[Problem] = []
    for root, dirs, names in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        base = Path(root)
        for entry in [*dirs, *sorted(names)]:
            path = base / entry
            relative = path.relative_to(folder).as_posix()
            if entry in dirs and not path.is_symlink():
                continue
            if entry.startswith("."):
                continue
            if path.is_symlink():
                try:
                    target = path.resolve()
                except (RuntimeError, OSError) as exc:  # RuntimeError up to 3.12, OSError ELOOP after
                    if isinstance(exc, OSError) and exc.errno != errno.ELOOP:
                        raise  # the skill's own read error (scan_skills says it)
                    problems.append(Problem(f"{label}/{relative}", "is a symlink in a loop (it leads back to itself)"))
                    continue
                if not target.is_relative_to(folder):
                    problems.append(Problem(f"{label}/{relative}", "is a symlink leading outside the skill's folder"))
                    continue
            if relative == SKILL_FILE or not path.is_file():
                continue
            if path.stat().st_size > max_bytes:
                problems.append(Problem(f"{label}/{relative}", f"is larger than {max_bytes} bytes"))
                continue
            files.append(relative)
            if len(files) > MAX_FILES:
                problems.append(Problem(label, f"holds more than {MAX_FILES} files"))
                return tuple(files[:MAX_FILES]), problems
    return tuple(files), problems


def _link_problems(body: str, folder: Path, label: str) -> list[Problem]:
    """Relative links of the body that lead outside the folder (an error) or to nothing (a warning)."""
    problems: list[Problem] = []
    where = f"{label}/{SKILL_FILE}"
    for target in dict.fromkeys(match.group(1) for match in _LINK.finditer(body)):
        path = target.split("#", 1)[0].split("?", 1)[0]
        if not path or _SCHEME.match(path):
            continue  # an anchor or a URL
        try:
            confined_file(folder, path)
        except SkillPathError as exc:
            severity: Severity = "error" if exc.escapes else "warning"
            problems.append(Problem(where, f"a link: {exc}", severity))  # "a link: 'x.md' does not exist…"
    return problems


def shadowed(name: str) -> str:
    """The warning for a skill named like one of klaw's commands: `/name` runs the command (decision 529)."""
    return (
        f"/{name} is klaw's command, so typing /{name} runs the command, not this skill (the agent can still use it);"
        " rename the folder and its name to call the skill by /name"
    )


_POSITIONAL = re.compile(r"\$(?:\{([1-9])\}|([1-9])(?![0-9]))")  # as skill_call.py fills them


def _placeholder_out_of_order(body: str) -> str | None:
    """The warning for a body writing `$N` with some `$1`..`$N-1` unused: a call by name fills `$N` with its Nth
    word, empty when fewer are given, and such a `$N` is most likely a dollar amount ("costs $5") that vanishes
    silently (newcomer24, decision 540). None when the placeholders run in order from `$1`."""
    used = {int(m.group(1) or m.group(2)) for m in _POSITIONAL.finditer(body)}
    late = sorted(n for n in used if not set(range(1, n)) <= used)
    if not late:
        return None
    first = late[0]
    return (
        f"${first} is filled with the {_ORDINALS[first - 1]} word after /name when the skill is called by name, and"
        f" emptied when fewer words are given, but no ${min(set(range(1, first)) - used)} comes before it: if it is a"
        f" dollar amount, write {first} dollars (or add user-invocable: false)"
    )


_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth")
