"""Print, as pip requirement lines, the packages in this Python's environment that plug into klaw (their
entry points in a `klaw.` group, such as `klaw.tools`), klaw itself left out.

scripts/setup-venv.sh runs it with .venv's Python before making .venv again (after uv failed to install
into it), then installs these lines into the new one: a plugin a person added with `.venv/bin/pip install`
would otherwise go with the old environment, silently. A plugin installed from a folder or a URL is
named by where it came from (PEP 610's direct_url.json), one from an index by its name and version.
"""

from __future__ import annotations

import json
from importlib.metadata import Distribution, distributions


def requirement(dist: Distribution) -> str:
    name = dist.metadata["Name"]
    origin = dist.read_text("direct_url.json")
    if not origin:
        return f"{name}=={dist.version}"
    found = json.loads(origin)
    url = str(found.get("url", ""))
    if found.get("dir_info", {}).get("editable"):
        return f"-e {url.removeprefix('file://')}"
    return f"{name} @ {url}"


def main() -> None:
    seen: set[str] = set()
    for dist in distributions():
        name = (dist.metadata["Name"] or "").lower()
        if not name or name == "klaw" or name in seen:
            continue
        if any(point.group.startswith("klaw.") for point in dist.entry_points):
            seen.add(name)
            print(requirement(dist))


if __name__ == "__main__":
    main()
