"""Silent replies: a subagent that has nothing to report says so with `{"silent": true}`.

Only a reply that is, as a whole, a JSON object whose `silent` member is the JSON value `true` is
silent. Anything else — no `silent` member, `"silent": false` or `"true"`, a JSON array, plain text,
JSON that does not parse — is delivered: when in doubt, the person hears about it
(docs/decisions/004-silent-replies.md).
"""

from __future__ import annotations

import json


def is_silent(reply: str) -> bool:
    try:
        data = json.loads(reply)
    except ValueError:  # not JSON at all, or broken JSON: deliver it
        return False
    return isinstance(data, dict) and data.get("silent") is True
