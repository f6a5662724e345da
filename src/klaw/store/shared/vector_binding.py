"""The one rule of every vector write on either backend: vectors are stored only once `bind_embedder`
has said which embedder (and size) the table holds; a write before that is a caller's bug, refused
with what to call."""

from __future__ import annotations

from typing import TypeVar

from klaw.store.protocol import StorageError

T = TypeVar("T")


def bound(binding: T | None, what: str) -> T:
    """The binding `bind_embedder` recorded (a size, or the embedder and size), for a write of `what` vectors."""
    if binding is None:
        raise StorageError(f"bind_embedder must be called before {what} vectors are stored")
    return binding
