"""What a home's language means for its memory: the settings `klaw init --language` writes to engine.yaml.

Retrieval has two language-bound parts, both fixed when messages are indexed: the full-text tokenizer
(`database.tokenizer`) and the embedder (`embedder.backend`). English keeps the defaults (the porter
stemmer and all-MiniLM-L6-v2). Any other language gets the multilingual embedder (e5) and a tokenizer
that keeps its words whole (`unicode61`), or, for the languages written without spaces between words
(Chinese, Japanese, Thai, Lao, Khmer, Burmese), indexes every three characters (`trigram`). e5's
cosine similarities sit on another scale than MiniLM's, so its two gates are written too.
(docs/memory/languages.md; docs/decisions/160-full-text-tokenizer-per-home.md, 161-multilingual-embedder.md)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from klaw.errors import KlawError

if TYPE_CHECKING:  # `klaw init` and `klaw --help` need no pydantic model to name a tokenizer
    from klaw.config import FullTextTokenizer

ENGLISH = "en"
UNSPACED_LANGUAGES = frozenset({"zh", "ja", "th", "lo", "km", "my"})
_CODE = re.compile(r"^[a-z]{2,3}$")
# The ISO 639-1 codes of the languages e5 (multilingual-e5-small, trained on XLM-R's ~100 languages) was
# trained on: a made-up code (`xx`) is refused with this list rather than a home set up for nothing.
_LANGUAGE_CODES = (
    "af am ar as az be bg bn br bs ca cs cy da de el en eo es et eu fa fi fr fy ga gd gl gu ha he hi hr hu hy"
    " id is it ja jv ka kk km kn ko ku ky la lo lt lv mg mk ml mn mr ms my nb ne nl nn no om or pa pl ps pt"
    " ro ru sa sd si sk sl so sq sr su sv sw ta te th tl tr ug uk ur uz vi xh yi zh"
)
LANGUAGES = frozenset(_LANGUAGE_CODES.split())

# e5's gates, measured on LoCoMo dev with `klaw bench recall` / `klaw bench past-sessions` (decision 161).
E5_RELEVANCE_THRESHOLD = 0.2
E5_MIN_SIMILARITY = 0.8


class LanguageError(KlawError, ValueError):
    """A language code `klaw init` cannot use; the message says what it takes."""


@dataclass(frozen=True, slots=True)
class LanguageSettings:
    """The engine.yaml values a language sets."""

    code: str
    tokenizer: FullTextTokenizer
    embedder: str
    relevance_threshold: float | None = None  # autoRag.relevanceThreshold (None: the default's)
    min_similarity: float | None = None  # rag.minSimilarity


def language_settings(code: str) -> LanguageSettings:
    """The settings for an ISO 639-1 language code such as `en`, `ru`, `zh` (a region, `pt-BR`, is dropped)."""
    normalized = code.strip().lower().split("-")[0].split("_")[0]
    if not _CODE.match(normalized):
        raise LanguageError(f"--language takes a language code such as en, ru, de, zh or ja (ISO 639-1), not {code!r}")
    if normalized not in LANGUAGES:
        raise LanguageError(
            f"--language {code!r} is not a language klaw's embedder knows; use one of (ISO 639-1):"
            f" {', '.join(sorted(LANGUAGES))}"
        )
    if normalized == ENGLISH:
        return LanguageSettings(normalized, "porter", "minilm")
    tokenizer: FullTextTokenizer = "trigram" if normalized in UNSPACED_LANGUAGES else "unicode61"
    return LanguageSettings(normalized, tokenizer, "e5", E5_RELEVANCE_THRESHOLD, E5_MIN_SIMILARITY)


def apply_to_config_text(text: str, settings: LanguageSettings) -> str:
    """The commented default engine.yaml with `settings` written into its lines (comments kept)."""
    lines = text.splitlines(keepends=True)
    section = ""
    out: list[str] = []
    for line in lines:
        if line[:1].isalpha():
            section = line.split(":", 1)[0]
        key = line.strip().split(":", 1)[0] if line.startswith("  ") and not line.startswith("   ") else ""
        value = _value_for(section, key, settings)
        if value is not None:
            comment = line[line.index("#") :] if "#" in line else "\n"
            head = f"  {key}: {value}"
            line = head.ljust(44) + comment if comment != "\n" else head + "\n"
        out.append(line)
    return "".join(out)


def _value_for(section: str, key: str, settings: LanguageSettings) -> str | None:
    wanted: dict[tuple[str, str], object | None] = {
        ("database", "tokenizer"): settings.tokenizer,
        ("embedder", "backend"): settings.embedder,
        ("autoRag", "relevanceThreshold"): settings.relevance_threshold,
        ("rag", "minSimilarity"): settings.min_similarity,
    }
    value = wanted.get((section, key))
    return None if value is None else str(value)
