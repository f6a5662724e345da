"""One root for klaw's errors (`klaw.errors.KlawError`), and its tree drawn once, exactly, in that
module's docstring: every error class in klaw is there under its parent with the built-in base it
keeps (so `except ValueError` still catches what it caught), and nothing else is."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import klaw
import klaw.errors
from klaw.errors import KlawError

_LINE = re.compile(r"^(?P<indent>\s*)[*+-] (?P<name>\w+)(?: \((?P<builtin>\w+)\))?")


def _klaw_exceptions() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(klaw.__path__, "klaw."):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == info.name:
                found[name] = obj
    return found


def _drawn() -> dict[str, tuple[str | None, str | None]]:
    """name → (parent, built-in base written beside it) as the docstring draws them."""
    tree: dict[str, tuple[str | None, str | None]] = {}
    parents: list[tuple[int, str]] = []
    for line in (klaw.errors.__doc__ or "").splitlines():
        match = _LINE.match(line)
        if match is None:
            continue
        depth = len(match["indent"])
        while parents and parents[-1][0] >= depth:
            parents.pop()
        tree[match["name"]] = (parents[-1][1] if parents else None, match["builtin"])
        parents.append((depth, match["name"]))
    return tree


def test_every_public_error_class_has_klaw_error_as_its_root() -> None:
    classes = _klaw_exceptions()
    outside = sorted(name for name, cls in classes.items() if not issubclass(cls, KlawError) and name[0] != "_")
    assert outside == []
    assert len(classes) > 30


def test_the_docstring_draws_the_whole_tree_exactly() -> None:
    classes = {name: cls for name, cls in _klaw_exceptions().items() if issubclass(cls, KlawError)}
    drawn = _drawn()
    assert sorted(drawn) == sorted(classes)
    for name, (parent, builtin) in drawn.items():
        cls = classes[name]
        klaw_bases = [base.__name__ for base in cls.__bases__ if issubclass(base, KlawError)]
        assert klaw_bases == ([parent] if parent else []), name
        if builtin is not None:
            assert builtin in [base.__name__ for base in cls.__bases__], name
        inherited = {b for b in (ValueError, RuntimeError) if issubclass(cls, b)}
        written = {c for n in _ancestry(name, drawn) if (c := drawn[n][1]) is not None}
        assert {b.__name__ for b in inherited} == written, name


def _ancestry(name: str, drawn: dict[str, tuple[str | None, str | None]]) -> list[str]:
    chain = [name]
    while (parent := drawn[chain[-1]][0]) is not None:
        chain.append(parent)
    return chain


_PLACE = re.compile(r"^\s*[*+-] (?P<name>\w+)[^\n]*?\.+ (?P<module>[\w/]+)(?::|$)")


def test_the_module_drawn_beside_an_error_is_the_one_defining_it() -> None:
    """`ForgetError ... memory/forgetting` sent a reader to a module that only imports it (review51)."""
    classes = _klaw_exceptions()
    misplaced = []
    for line in (klaw.errors.__doc__ or "").splitlines():
        if (match := _PLACE.match(line)) is not None:
            drawn = "klaw." + match["module"].replace("/", ".")
            if classes[match["name"]].__module__ != drawn:
                misplaced.append(f"{match['name']}: drawn in {drawn}, defined in {classes[match['name']].__module__}")
    assert misplaced == []
