"""Running code_execute for real, through the registry, as the engine does: what the model would read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from klaw.config import SandboxConfig
from klaw.home import KlawHome
from klaw.llm.messages import ToolCall
from klaw.store.records import ChatRef
from klaw.tools.calls import ToolResult
from klaw.tools.registry import ToolRegistry
from klaw.tools.sandbox.backend import SandboxBackend, Unavailable
from klaw.tools.sandbox.choice import choose_backend
from klaw.tools.sandbox.tool import register_code_execute
from klaw.tools.schema import ToolContext


def no_sandbox_reason() -> str | None:
    """Why the default sandbox does not work here (no bwrap; root without a pids cgroup), or None."""
    found = choose_backend(SandboxConfig(), KlawHome(Path("/nonexistent")))
    return found.reason if isinstance(found, Unavailable) else None


def backend_or_skip(home: KlawHome, **config: Any) -> tuple[SandboxBackend, SandboxConfig]:
    """The configured backend, or the test skipped saying why there is none here (Docker without a daemon)."""
    sandbox = SandboxConfig.model_validate(config)
    backend = choose_backend(sandbox, home)
    if isinstance(backend, Unavailable):
        pytest.skip(f"no {sandbox.backend} sandbox here: {backend.reason}")
    return backend, sandbox


class Runner:
    def __init__(self, home: KlawHome, **config: Any) -> None:
        self.home = home
        backend, sandbox = backend_or_skip(home, **config)
        self.registry = ToolRegistry(timeout_seconds=60)
        register_code_execute(self.registry, backend, sandbox)
        home.workspace.mkdir(parents=True, exist_ok=True)

    async def run(self, code: str, language: str = "python", timeout_seconds: int | None = None) -> ToolResult:
        arguments: dict[str, Any] = {"language": language, "code": code}
        if timeout_seconds is not None:
            arguments["timeout_seconds"] = timeout_seconds
        context = ToolContext(ChatRef("console", "me"), self.home.workspace)
        return await self.registry.execute(ToolCall("call_1", "code_execute", json.dumps(arguments)), context)


def home_with_secrets(tmp_path: Path) -> KlawHome:
    """A KLAW_HOME holding what code must never reach, beside its workspace."""
    home = KlawHome(tmp_path / "home")
    home.workspace.mkdir(parents=True)
    home.config_file.write_text("models: {}\n# secret-config-line\n", encoding="utf-8")
    home.web_token_file.write_text("secret-web-token\n", encoding="utf-8")
    return home
