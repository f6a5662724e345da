"""Which backend `sandbox.backend` gives on this machine, or why none: decided once, at engine start."""

from __future__ import annotations

from klaw.config import SandboxConfig
from klaw.home import KlawHome
from klaw.tools.sandbox.backend import SandboxBackend, SandboxLimits, Unavailable
from klaw.tools.sandbox.bubblewrap import bubblewrap_backend
from klaw.tools.sandbox.docker import docker_backend


def choose_backend(config: SandboxConfig, home: KlawHome) -> SandboxBackend | Unavailable:
    """`auto` and `bubblewrap` try bwrap (auto never falls back to Docker: a daemon and an image are
    the person's choice); `docker` needs a daemon that answers; `none` is off."""
    limits = SandboxLimits.from_config(config)
    if config.backend == "none":
        return Unavailable(
            "sandbox.backend is none in engine.yaml",
            "set sandbox.backend to auto in engine.yaml (bubblewrap: apt install bubblewrap), then restart klaw",
        )
    if config.backend == "docker":
        return docker_backend(config.docker_image, limits)
    return bubblewrap_backend(limits, home_root=home.root, venv=home.sandbox_venv)
