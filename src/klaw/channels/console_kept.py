"""What an attached `klaw chat` kept while its engine was down, sent by the next `klaw chat` run in process.

An attached terminal (console_attached.py) keeps what is typed while the engine is away in its own
buffer, `KLAW_HOME/gateway/terminal/inbound.jsonl`, and sends it when the link is back or at the next
attach. A person whose `klaw serve` stays down starts `klaw chat` alone: its engine runs in process and
no link reads that buffer, so the messages waited unseen for an attach that might never come (trial48).
The in-process chat at a terminal sends them first, in order, each as if typed then (its reply, or its
question, shown as any), under the id the buffer gave it: a message the old engine took just before it
went (stored, not yet acknowledged here) is not stored twice. Each is dropped from the buffer once the
engine has it. A piped chat leaves them (its stdout is its own reply alone) and says where they wait.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from klaw.gateway.buffer import InboundBuffer
    from klaw.store.records import ChatRef

TERMINAL_DIR = "terminal"  # under KLAW_HOME/gateway: the attached terminal's buffer and lock
SENDING = "Sending what you typed in an attached klaw chat while its engine was down:"
WAITING = (
    "{n} message(s) typed in an attached klaw chat while its engine was down wait in {where}: the next klaw chat"
    " at a terminal sends them (a piped one prints only its own reply)."
)


def kept_where(gateway_dir: Path) -> Path:
    return gateway_dir / TERMINAL_DIR


@dataclass
class KeptMessages:
    """The attached terminal's buffer, opened by an in-process `klaw chat`: its messages for one chat."""

    buffer: InboundBuffer

    @classmethod
    async def open(cls, gateway_dir: Path) -> KeptMessages | None:
        """None when the attached terminal's buffer holds nothing (no file is made when there is none)."""
        from klaw.gateway.buffer import FILE_NAME, InboundBuffer

        if not (kept_where(gateway_dir) / FILE_NAME).exists():
            return None
        buffer = await InboundBuffer.open(kept_where(gateway_dir))
        return cls(buffer) if len(buffer) else None

    def of(self, chat: ChatRef) -> list[tuple[str, str]]:
        """(id, text as typed) of each message kept for `chat`, oldest first; a command as its slash text."""
        from klaw.engine.frames import CommandFrame  # the engine's loaded it by now (decision 378)

        kept = []
        for frame in self.buffer.pending():
            if (frame.channel, frame.chat_id) != (chat.channel, chat.chat_id):
                continue
            text = f"/{frame.command} {frame.args}".strip() if isinstance(frame, CommandFrame) else frame.text
            kept.append((frame.id, text))
        return kept

    async def sent(self, frame_id: str) -> None:
        """The engine has it: out of the buffer, so neither this chat nor an attach sends it again."""
        await self.buffer.ack(frame_id)
