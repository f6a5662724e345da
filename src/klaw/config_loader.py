"""Loading `engine.yaml` into an `EngineConfig`, with environment overrides and provenance.

Sources, lowest to highest precedence: built-in defaults, `engine.yaml`, environment variables
named `KLAW__<SECTION>__<FIELD>` (camelCase or snake_case parts, e.g.
`KLAW__PROCESSING__DEBOUNCEMS=500`; values are parsed as YAML scalars). `klaw config show` prints
every effective value with the source it came from, so a person can see why the engine behaves as
it does. Invalid input raises `ConfigError` whose message names the field, the value and the rule.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from klaw.config import EngineConfig
from klaw.errors import KlawError
from klaw.redaction import mask_url_credentials
from klaw.small_file import read_small
from klaw.yaml_syntax import BoundedSafeLoader, load_with, mark_line, safe_load, syntax_message

ENV_PREFIX = "KLAW__"
MAX_CONFIG_BYTES = 1 << 20  # engine.yaml as written is a few KiB


class ConfigError(KlawError, ValueError):
    """The configuration cannot be used; the message says where, what and how to fix it."""


@dataclass(frozen=True)
class LoadedConfig:
    config: EngineConfig
    # dotted camelCase path (e.g. "processing.debounceMs") -> "engine.yaml" | "env KLAW__…"
    sources: Mapping[str, str]
    path: Path
    # engine.yaml's bytes as read for `config` (None: there was no file, all defaults): what a running engine
    # compares the file with to say it changed since the start (engine/config_drift.py, decision 474). Kept
    # here, beside the config, not on EngineConfig: a private attribute there counted in pydantic's `==`.
    text: bytes | None = None


# An unknown field close to no known one is likelier a newer klaw's than a typo (decision 396).
_NEWER = "if a newer klaw wrote it, upgrade this one (docs/maintenance.md) or remove the field"


def load_config(path: Path, env: Mapping[str, str] | None = None) -> LoadedConfig:
    """Read `path` (missing file = all defaults), apply env overrides, validate."""
    env = os.environ if env is None else env
    text = _read_bytes(path)
    raw = _parse_yaml(path, text)
    sources = {key: path.name for key in _leaf_paths(raw)}
    overrides: dict[tuple[str, ...], str] = {}
    for key, value, var in _env_overrides(env):
        _set_path(raw, key, value)
        sources[".".join(key)] = f"env {var}"
        overrides[key] = var
    try:
        config = EngineConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, f"{path} (or a KLAW__ environment override)", overrides)) from None
    return LoadedConfig(config=config, sources=sources, path=path, text=text)


def config_from_mapping(raw: Mapping[str, Any], where: str) -> EngineConfig:
    """`raw` (the engine.yaml shape, e.g. a library caller's `config=` dict) as an `EngineConfig`; a
    ConfigError names each bad field as an invalid engine.yaml does, `where` saying where it came from."""
    try:
        return EngineConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, where, {})) from None


def _read_bytes(path: Path) -> bytes | None:
    """The file's bytes, read once (None: there is none); they are parsed and kept as they are."""
    if not path.exists():
        return None
    if path.is_dir():
        raise ConfigError(f"{path} is a directory; engine.yaml must be a file (move it aside and run 'klaw init').")
    try:  # a regular file of at most MAX_CONFIG_BYTES: a FIFO there hung the start, /dev/zero ate memory (453)
        return read_small(path, MAX_CONFIG_BYTES)
    except OSError as exc:
        raise ConfigError(
            f"cannot read {path}: {exc.strerror or exc}; engine.yaml must be a regular file of at most 1 MiB."
        ) from None


def _parse_yaml(path: Path, read: bytes | None) -> dict[str, Any]:
    if read is None:
        return {}
    try:
        text = read.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8 text (byte {exc.start} cannot be decoded); save it as UTF-8.") from None
    try:  # the loader's reader refuses a control character (NUL, ESC, DEL) at once: a YAMLError too (503)
        loader = _UniqueKeyLoader(text)  # a SafeLoader (nesting bounded) that notes repeated keys
        data = load_with(loader)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} {syntax_message(text, exc)}") from None
    if loader.repeated:
        raise ConfigError(_repeated_message(path, loader.repeated))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections, got {type(data).__name__}.")
    return data


@dataclass(frozen=True)
class _RepeatedKey:
    key: str
    line: int
    first_line: int


def _repeated_message(path: Path, repeated: list[_RepeatedKey]) -> str:
    """Every key given twice, in one message: a newcomer pasting two sections (`models:` and
    `routing:`) over the originals fixed one, ran the check again, and only then learnt of the other."""
    if len(repeated) == 1:
        (one,) = repeated
        return (
            f"{path} line {one.line}: {one.key!r} is already set at line {one.first_line}, and YAML would"
            f" silently keep only the second. Merge the two {one.key!r} blocks into one."
        )
    each = "; ".join(f"line {r.line}: {r.key!r} is already set at line {r.first_line}" for r in repeated)
    return (
        f"{path} gives {len(repeated)} keys twice, and YAML would silently keep only the second of each: {each}."
        " Merge each pair of blocks into one."
    )


class _UniqueKeyLoader(BoundedSafeLoader):
    """`yaml.safe_load`, except that a key given twice in one mapping is noted in `repeated` (all of
    them, for one message). YAML keeps the last silently, so a second `tools:` block appended below
    `klaw init`'s would drop the first's settings (its approval list among them) while `klaw config
    check` said valid."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.repeated: list[_RepeatedKey] = []

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *base` merges on purpose; keys it brings may be overridden
            key = self.construct_object(key_node, deep=True)
            line = mark_line(key_node.start_mark)
            if isinstance(key, str | int | float | bool) and key in seen:
                self.repeated.append(_RepeatedKey(str(key), line, seen[key]))
            elif isinstance(key, str | int | float | bool):
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _leaf_paths(data: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> Iterator[str]:
    for key, value in data.items():
        here = (*prefix, str(key))
        if isinstance(value, Mapping) and value:
            yield from _leaf_paths(value, here)
        else:
            yield ".".join(here)


def _env_overrides(env: Mapping[str, str]) -> Iterator[tuple[tuple[str, ...], Any, str]]:
    for var in sorted(env):
        if not var.startswith(ENV_PREFIX):
            continue
        parts = tuple(p for p in var[len(ENV_PREFIX) :].split("__") if p)
        if not parts:
            continue
        key = tuple(_canonical_key(p) for p in parts)
        try:
            value = safe_load(env[var])
        except yaml.YAMLError:
            value = env[var]
        yield key, value, var


_KNOWN_KEYS: dict[str, str] = {}


def _canonical_key(part: str) -> str:
    """Map an env-var path part (any case, snake or camel) onto the config's camelCase key."""
    if not _KNOWN_KEYS:
        for name in _all_aliases(EngineConfig):
            _KNOWN_KEYS[name.lower().replace("_", "")] = name
    return _KNOWN_KEYS.get(part.lower().replace("_", ""), part)


def _all_aliases(model: type[BaseModel]) -> Iterator[str]:
    for name, field in model.model_fields.items():
        yield field.alias or name
        yield from _nested_aliases(field.annotation)


def _nested_aliases(annotation: Any) -> Iterator[str]:
    """Aliases of the models inside a field's type: a section, or the values of `models:`.

    `models` is a `dict[str, ModelConfig]`; without looking inside it, `KLAW__MODELS__X__MAXRETRIES`
    would stay upper-case and be rejected as an unknown field.
    """
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield from _all_aliases(annotation)
        return
    for arg in get_args(annotation):
        yield from _nested_aliases(arg)


def _set_path(data: dict[str, Any], key: tuple[str, ...], value: Any) -> None:
    node = data
    for part in key[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[key[-1]] = value


def _describe(exc: ValidationError, where: str, overrides: Mapping[tuple[str, ...], str]) -> str:
    """One line per problem, naming the environment variable when the value came from one
    (`overrides`: config path -> variable), and for an unknown field the known one it is closest to."""
    lines = [f"Invalid configuration in {where}:"]
    for error in exc.errors():
        loc = tuple(str(p) for p in error["loc"])
        field = ".".join(loc) or "(top level)"
        rule = _rule(error)
        var = next((v for key, v in overrides.items() if loc and key[: len(loc)] == loc), None)
        if error["type"] == "extra_forbidden":
            closest = _closest(loc) if loc else ""
            newer = "" if var or closest.startswith("did you mean") else f"; {_NEWER}"
            rule = f"unknown field ({closest}fields are camelCase{newer})"
        shown = "" if error["type"] in ("missing", "extra_forbidden") else _shown(field, error.get("input"))
        named = (error.get("ctx") or {}).get("field")
        if not loc and isinstance(named, str):
            # A check across sections (routing.default naming a model under models:) says which field
            # it judged, so a value from the environment is traced to its variable like any other.
            var = overrides.get(tuple(named.split(".")))
            lines.append(f"  - {rule}{f' ({named} is set by {var})' if var else ''}")
            continue
        lines.append(f"  - {field}{shown}{f' (from {var})' if var else ''}: {rule}")
    return "\n".join(lines)


def _rule(error: ErrorDetails) -> str:
    """The problem in klaw's words: a check of klaw's own raising ValueError gave pydantic's
    "Value error, <our sentence>"; the sentence alone is what a person needs."""
    raised = (error.get("ctx") or {}).get("error")
    if error["type"] == "value_error" and isinstance(raised, ValueError) and str(raised):
        return str(raised)
    return error["msg"]


def _closest(loc: tuple[str, ...]) -> str:
    """ "did you mean processing? " for a misspelt field, else the fields its section has: judged among
    the names valid at that place only (`rag.topK` is not helped by `memory.autoRag.topK`)."""
    known = _fields_at(loc[:-1])
    by_folded = {name.lower().replace("_", ""): name for name in known}
    wanted = loc[-1].lower().replace("_", "")
    found = difflib.get_close_matches(wanted, list(by_folded), n=1, cutoff=0.75)
    if found and _a_typo(wanted, found[0]):
        return f"did you mean {by_folded[found[0]]}? "
    if known:
        return f"{'this section has' if loc[:-1] else 'the sections are'}: {', '.join(sorted(known))}; "
    return "check its spelling; "


def _a_typo(written: str, known: str) -> bool:
    """Whether `written` is `known` mistyped: a few letters apart, not a name of its own sharing a long
    prefix (workspaceQuotaFiles is not workspaceQuotaMb misspelt, though difflib finds them close)."""
    matcher = difflib.SequenceMatcher(None, written, known)
    apart = len(written) + len(known) - 2 * sum(block.size for block in matcher.get_matching_blocks())
    return apart <= max(2, len(known) // 5)


def _fields_at(path: tuple[str, ...]) -> list[str]:
    """The field names (camelCase) allowed under `path` of engine.yaml; [] where the path leads to
    nothing known. A `models:` entry's key is any model id, so it is stepped over."""
    annotation: Any = EngineConfig
    for part in path:
        if get_origin(annotation) is dict:
            annotation = get_args(annotation)[1]
            continue
        model = _model_in(annotation)
        field = next((f for n, f in model.model_fields.items() if part in (n, f.alias)), None) if model else None
        if field is None:
            return []
        annotation = field.annotation
    model = _model_in(annotation)
    return [field.alias or name for name, field in model.model_fields.items()] if model else []


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds (itself, or inside `X | None`)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((a for a in get_args(annotation) if isinstance(a, type) and issubclass(a, BaseModel)), None)


def _shown(field: str, value: Any) -> str:
    """` = value` for the error line, unless it may hold a secret: a `…Env` field that failed is probably
    the key itself, a whole section may contain one, and a URL's password is masked."""
    if field.endswith("Env") or isinstance(value, (dict, list)):
        return ""
    return f" = {mask_url_credentials(repr(value))}"
