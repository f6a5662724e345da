"""`/summarizer`, `/embeddings` and `/rag`: switching the memory workers and retrieval, and their state.

Switches and `/rag set` are stored in the database's settings (`MemorySettings`), so they survive a
restart and override engine.yaml; the engine starts its workers according to them. Everything shown
is counts, states and error classes: never the text of a summary or message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from klaw.engine.memory_settings import (
    EMBEDDINGS_ENABLED,
    OVERRIDDEN_FIELDS,
    RAG_ENABLED,
    RAG_KEYS,
    SUMMARIZER_ENABLED,
    MemorySettings,
    SettingError,
)
from klaw.memory.embedding_queue import BACKOFF_SECONDS, EmbeddingQueue
from klaw.memory.summaries.service import SummarizerService
from klaw.memory.summaries.worker import WorkerState, WorkerStatus
from klaw.store.protocol import MemoryChunkRepository, Storage
from klaw.store.records import ChatRef
from klaw.text_preview import preview

Handler = Callable[[ChatRef, str], Awaitable[str]]
CONFIRM = "confirm"


@dataclass(frozen=True, eq=False)
class MemoryCommands:
    settings: MemorySettings
    summaries: SummarizerService
    embedding_queue: EmbeddingQueue
    store: Storage

    def handlers(self) -> dict[str, Handler]:
        return {"summarizer": self.summarizer, "embeddings": self.embeddings, "rag": self.rag}

    # -- /summarizer -------------------------------------------------------------------------------

    async def summarizer(self, _chat: ChatRef, args: str) -> str:
        action = args.lower()
        if action == "on":
            await self.settings.set_flag(SUMMARIZER_ENABLED, True)
            self.summaries.start()
            return "Summarizer on: exchanges and segments are summarized in the background."
        if action == "off":
            await self.settings.set_flag(SUMMARIZER_ENABLED, False)
            await self.summaries.stop()
            return "Summarizer off: no new summaries until /summarizer on (existing ones are still used)."
        if action in ("", "status"):
            return await self._summarizer_status()
        return "Usage: /summarizer [on|off|status]"

    async def _summarizer_status(self) -> str:
        status = await self.summaries.status()
        switch = "on" if self.settings.summarizer_enabled else "off"
        counts = status.counts
        return "\n".join(
            [
                f"Summarizer: {switch} ({'running' if status.running else 'stopped'}), model {status.model}",
                f"- {_worker_line(status.exchange)}",
                f"- {_worker_line(status.segment)}",
                f"Summaries stored (all time): {counts.exchanges} exchange(s) ({status.pending_exchanges} waiting),"
                f" {counts.segments_final} final and {counts.segments_rolling} rolling segment summaries,"
                f" {counts.vectors} embedded",
            ]
        )

    # -- /embeddings -------------------------------------------------------------------------------

    async def embeddings(self, _chat: ChatRef, args: str) -> str:
        words = args.lower().split() or ["status"]
        action = words[0]
        if action == "on" and len(words) == 1:
            await self.settings.set_flag(EMBEDDINGS_ENABLED, True)
            revived = await self.store.embedding_jobs.retry_failed()
            self.embedding_queue.start()
            self.embedding_queue.notify()
            again = f"; {revived} failed job(s) queued again" if revived else ""
            return f"Embedding worker on{again}."
        if action == "off" and len(words) == 1:
            await self.settings.set_flag(EMBEDDINGS_ENABLED, False)
            await self.embedding_queue.aclose()
            return "Embedding worker off: new jobs wait in the database until /embeddings on."
        if action == "status" and len(words) == 1:
            return await self._embeddings_status()
        if action == "rebuild" and words[1:] in ([], [CONFIRM]):
            return await self._rebuild(confirmed=words[1:] == [CONFIRM])
        return "Usage: /embeddings [on|off|status|rebuild]"

    async def _embeddings_status(self) -> str:
        status = await self.embedding_queue.status()
        switch = "on" if self.settings.embeddings_enabled else "off"
        lines = [
            f"Embedding worker: {switch} ({'running' if status.running else 'stopped'});"
            f" {status.embedded} embedded since the engine started"
        ]
        for target in await self.store.embedding_jobs.by_target():
            line = f"- {target.target}: {target.pending} pending, {target.failed} failed"
            if target.failed and target.last_error:
                line += f" (last error: {target.last_error})"
            lines.append(line)
        if len(lines) == 1:
            lines.append("- no jobs waiting")
        summaries = await self.store.summaries.counts()
        lines.append(f"Vectors: {await self.store.vectors.count()} messages, {summaries.vectors} summaries")
        if status.failed:
            lines.append(
                f"Failed jobs gave up after {len(BACKOFF_SECONDS)} retries ({BACKOFF_SECONDS[0]}–"
                f"{BACKOFF_SECONDS[-1]} s apart); /embeddings on queues them again."
            )
        return "\n".join(lines)

    async def _rebuild(self, *, confirmed: bool) -> str:
        if not confirmed:
            counts = await self.store.summaries.counts()
            return (
                f"This deletes the {counts.vectors} summary vectors and embeds every summary again"
                " (message vectors are rebuilt by `klaw reindex`). Send /embeddings rebuild confirm to go ahead."
            )
        queued = await self.store.summaries.reembed_all()
        self.embedding_queue.notify()
        running = (await self.embedding_queue.status()).running
        waiting = "" if running else " The worker is off: /embeddings on starts it."
        return f"Summary vectors dropped; {queued} summaries queued for embedding.{waiting}"

    # -- /rag --------------------------------------------------------------------------------------

    async def rag(self, _chat: ChatRef, args: str) -> str:
        words = args.split()
        action = words[0].lower() if words else ""
        if action in ("on", "off") and len(words) == 1:
            await self.settings.set_flag(RAG_ENABLED, action == "on")
            if action == "on":
                return "Past conversations on: related earlier segments are placed in the context."
            return "Past conversations off: the context holds only this segment (and core memory)."
        if action == "config" and len(words) == 1:
            return self._rag_config()
        if action == "set":
            if len(words) != 3:
                return "Usage: /rag set <key> <value>"
            try:
                key, value = await self.settings.set_rag(words[1], words[2])
            except SettingError as exc:
                return str(exc)
            return f"Updated: {_file_name(key)} = {value}"
        if action == "reset" and len(words) <= 2:
            return await self._rag_reset(words[1] if len(words) == 2 else None)
        if action in ("", "status"):
            return await self._rag_status()
        return "Usage: /rag [on|off|config|set <key> <value>|reset [key]]"

    async def _rag_reset(self, key: str | None) -> str:
        """`/rag reset [key]`: the configuration's value again (engine.yaml, or a program's `config=`)."""
        try:
            reset = await self.settings.reset_rag(key)
        except SettingError as exc:
            return str(exc)
        if not reset:
            which = "No /rag value is" if key is None else f"{key} is not"
            return f"{which} set by command: the configuration's values apply (/rag config shows them)."
        values = ", ".join(f"{_file_name(name)} = {self._value(name)}" for name in reset)
        return f"Reset to the configuration's: {values}"

    def _value(self, key: str) -> str:
        rag = self.settings.rag
        return str(rag.enabled).lower() if key == RAG_ENABLED else str(getattr(rag, RAG_KEYS[key]))

    def _rag_config(self) -> str:
        lines = ["Past-conversation retrieval (engine.yaml's names):"]
        for key in (RAG_ENABLED, *RAG_KEYS):
            lines.append(f"  {_file_name(key)}: {self._value(key)}{self._source(key)}")
        lines.append("To change one: /rag set <name> <value> (e.g. /rag set minSimilarity 0.5)")
        if any(self.settings.overridden(key) for key in (RAG_ENABLED, *RAG_KEYS)):
            lines.append(
                "Values set by command (/rag set, /rag on|off) are kept in the database and override the"
                " configuration (engine.yaml, or a program's config=):"
                " /rag reset <key> undoes one, /rag reset every one"
            )
        return "\n".join(lines)

    def _source(self, key: str) -> str:
        return f" (set by command; /rag reset {_file_name(key)} undoes it)" if self.settings.overridden(key) else ""

    async def _rag_status(self) -> str:
        rag = self.settings.rag
        counts = await self.store.summaries.counts()
        return "\n".join(
            [
                f"Past conversations: {'on' if rag.enabled else 'off'}",
                f"Searchable: {counts.segments_final} segment summaries, {counts.exchanges} exchange summaries,"
                f" {counts.vectors} embedded",
                f"Up to {rag.conversation_limit} segment(s) and {rag.exchange_limit_per_conversation} exchange(s)"
                f" each, similarity at least {rag.min_similarity}, within {rag.max_tokens} tokens",
            ]
        )


def _file_name(key: str) -> str:
    """engine.yaml's name for a stored `/rag` key (`rag_min_similarity` → `rag.minSimilarity`): the name a
    person sees in the file and in `klaw config show` (first16 item 6)."""
    return OVERRIDDEN_FIELDS[key][0]


def _worker_line(status: WorkerStatus) -> str:
    line = (
        f"{status.name}: {status.state.value}; {status.completed} written since the engine started,"
        f" {status.failed} failed attempt(s)"
    )
    if status.given_up:
        line += f", {status.given_up} kept verbatim (the model gave no summary)"
    if status.state is WorkerState.BACKING_OFF and status.retry_at is not None:
        line += f"; next try at {_clock(status.retry_at)}"
    if status.last_error:
        line += f" (last error: {status.last_error})"
    return line


def _clock(moment: datetime) -> str:
    return moment.strftime("%H:%M:%S UTC")


SAVED_MEMORIES_SHOWN = 10
SAVED_MEMORY_CHARS = 200


async def saved_memory_lines(saved: MemoryChunkRepository, chat: ChatRef) -> list[str]:
    """/memory's lines after core memory: the chat's latest saved memories with the ids `/forget memory N` takes."""
    total = await saved.count(chat)
    if not total:
        return ["No saved memories in this chat (the agent saves one when asked to remember something)."]
    latest = await saved.latest(chat, SAVED_MEMORIES_SHOWN)
    lines = [f"Saved memories in this chat: {total} (newest first; /forget memory <id> erases one):"]
    lines += [f"- {m.memory_id}: {preview(m.content, SAVED_MEMORY_CHARS)} ({m.created_at:%Y-%m-%d})" for m in latest]
    if total > len(latest):
        lines.append(f"… and {total - len(latest)} older: `klaw memory search` finds them, or ask the agent.")
    return lines
