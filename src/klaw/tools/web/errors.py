"""`WebError`: why a fetch or a search gave no text, in words the model (and the person) can act on.

A `ToolRefusal`: the registry hands its message to the model as the call's (error) result and logs no
traceback, since a refused address, a 404 or a page too large is the web's weather, not a bug.
"""

from __future__ import annotations

from klaw.tools.calls import ToolRefusal


class WebError(ToolRefusal, ValueError):
    """A page or search that could not be read: refused (type, size, redirects) or failed (status, network)."""


class AddressRefused(WebError):
    """The address guard forbids where a URL leads; the message names host, address and why."""
