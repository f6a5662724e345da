"""`WebError`: why a fetch or a search gave no text, in words the model (and the person) can act on."""

from __future__ import annotations

from klaw.errors import KlawError


class WebError(KlawError, ValueError):
    """A page or search that could not be read: refused (type, size, redirects) or failed (status, network)."""


class AddressRefused(WebError):
    """The address guard forbids where a URL leads; the message names host, address and why."""
