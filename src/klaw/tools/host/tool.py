"""The `host_exec` tool: one allowed command on the host, in the workspace, within time and output limits.

Nothing isolates it: it runs as the klaw user, with that user's files and network, which is why it is
off until `hostExec.allow` names commands, and why `tools.approval` can make each call wait for the
person. Its environment is PATH, HOME, USER, LOGNAME, LANG and TZ only: the model's keys and tokens,
which klaw reads from its own environment, never reach a command.
"""

from __future__ import annotations

import os
from typing import Annotated

from pydantic import AfterValidator, Field

from klaw.config import HostExecConfig
from klaw.private_files import private_dirs
from klaw.tools.bounded_process import run_bounded
from klaw.tools.calls import ToolRefusal
from klaw.tools.host.patterns import CommandRefused, argument_vector, parse
from klaw.tools.registry import ToolRegistry
from klaw.tools.schema import ToolContext, ToolFunction

KEEP_BYTES = (6000, 4000)
_PASSED_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "TZ")


def host_exec_tool(config: HostExecConfig) -> ToolFunction:
    patterns = parse(config.allow)

    def allowed(command: str) -> str:
        # Checked as the arguments are validated, so a call that could never run is refused before
        # `tools.approval` asks the person about it (ToolRegistry.refuse).
        try:
            argument_vector(command, patterns)
        except CommandRefused as exc:
            raise ValueError(str(exc)) from None
        return command

    async def host_exec(context: ToolContext, command: str) -> str:
        try:
            argv = argument_vector(command, patterns)
        except CommandRefused as exc:  # expected: the model reads why, the log gets no traceback
            raise ToolRefusal(str(exc)) from None
        env = {name: os.environ[name] for name in _PASSED_ENV if name in os.environ}
        env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
        private_dirs(context.workspace)
        try:
            outcome = await run_bounded(
                argv,
                env=env,
                cwd=context.workspace,
                timeout_seconds=config.timeout_seconds,
                max_output_bytes=config.max_output_kb * 1024,
                keep_bytes=KEEP_BYTES,
            )
        except FileNotFoundError:
            raise ToolRefusal(f"there is no program {argv[0]!r} on the PATH") from None
        except PermissionError:
            raise ToolRefusal(f"{argv[0]!r} cannot be run (not executable)") from None
        return "\n".join(outcome.report())

    # The validator closes over this allow-list, so the annotation is an object, not a string (this
    # module's annotations are strings, resolved in its globals, where `allowed` is not).
    host_exec.__annotations__["command"] = Annotated[
        str, AfterValidator(allowed), Field(description="e.g. 'git status'; no shell operators")
    ]
    return host_exec


def register_host_exec(registry: ToolRegistry, config: HostExecConfig) -> None:
    """Offer `host_exec` when engine.yaml allows commands; else record why not (for /status)."""
    if not config.allow:
        registry.note_unavailable(
            "host_exec",
            "hostExec.allow in engine.yaml lists no command patterns",
            fix="list the commands it may run in hostExec.allow (docs/sandbox.md)",
        )
        return
    allowed = "; ".join(config.allow)
    registry.register(
        host_exec_tool(config),
        name="host_exec",
        description=f"Run a command on the host (not sandboxed), in the workspace, without a shell. Allowed: {allowed}",
    )
