"""Where klaw keeps its data: the layout of `KLAW_HOME` (default `~/.klaw`).

One object names every path so no module builds paths of its own, and tests point a whole engine
at a temporary directory by constructing one `KlawHome`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

HOME_ENV_VAR = "KLAW_HOME"
SKILLS_FOLDER = "skills"  # in the workspace: one folder per skill


@dataclass(frozen=True)
class KlawHome:
    root: Path

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> KlawHome:
        """`$KLAW_HOME` if set, else `~/.klaw`."""
        env = os.environ if env is None else env
        value = env.get(HOME_ENV_VAR)
        root = Path(value).expanduser() if value else Path.home() / ".klaw"
        return cls(root.resolve())

    @property
    def config_file(self) -> Path:
        return self.root / "engine.yaml"

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def skills_dir(self) -> Path:
        """The skills the agent may load: one folder per skill, each with a SKILL.md (docs/skills.md)."""
        return self.workspace / SKILLS_FOLDER

    @property
    def docs_index_file(self) -> Path:
        """The search index of the docs shipped with klaw (mode 0600), rebuilt when they or the embedder change."""
        return self.root / "docs_index.db"

    @property
    def embedder_cache(self) -> Path:
        """The local embedder's ONNX graphs (0700, files 0600), built from the weights on first use."""
        return self.root / "cache" / "embedder"

    @property
    def conversations(self) -> Path:
        return self.root / "conversations"

    @property
    def chat_log_file(self) -> Path:
        """What `klaw chat` logs (warnings, not messages), kept off the conversation's screen; 0600."""
        return self.root / "logs" / "chat.log"

    @property
    def socket_path(self) -> Path:
        return self.root / "engine.sock"

    @property
    def open_questions_file(self) -> Path:
        """The held calls whose approval question is open (engine/open_questions.py, decision 447)."""
        return self.root / "approvals-open.json"

    @property
    def privacy_walk_file(self) -> Path:
        """Written once `make_private` walked the whole home (home_privacy.py, decision 486)."""
        return self.root / ".private-walk"

    @property
    def plugins_seen_file(self) -> Path:
        """The package that offered each plugin tool group when klaw last loaded it (tools/plugins_seen.py):
        a group uninstalled since is named with the package to install again (decision 510)."""
        return self.root / "plugins_seen.json"

    @property
    def core_memory_file(self) -> Path:
        return self.root / "core_memory.json"

    @property
    def web_token_file(self) -> Path:
        """The web page's login token (mode 0600), created by the gateway on first start."""
        return self.root / "web_token"

    @property
    def web_address_file(self) -> Path:
        """The address the running gateway's web page listens on (mode 0600), removed when it stops:
        `klaw chat`, refused beside it, names the page really served (a port set by a KLAW__ variable
        in the service's environment, or picked by the kernel), not this shell's reading of engine.yaml."""
        return self.root / "web_address"

    @property
    def web_revoked_file(self) -> Path:
        """Web sessions signed out before their cookie expired (mode 0600), refused until then."""
        return self.root / "web_revoked.json"

    @property
    def gateway_dir(self) -> Path:
        """The gateway's durable inbound buffer (messages not yet acknowledged by the engine)."""
        return self.root / "gateway"

    @property
    def mcp_logs(self) -> Path:
        """What the MCP servers klaw starts write to stderr, one file per server (rewritten at each start)."""
        return self.root / "mcp"

    @property
    def scheduler_db(self) -> Path:
        return self.root / "scheduler.db"

    @property
    def sandbox_venv(self) -> Path:
        """The virtualenv `klaw sandbox install` fills, read-only inside code_execute's sandbox."""
        return self.root / "sandbox" / "venv"

    def database_file(self, configured: str) -> Path:
        """The SQLite file: `database.path` from the config, relative to KLAW_HOME unless absolute."""
        path = Path(configured).expanduser()
        return path if path.is_absolute() else self.root / path
