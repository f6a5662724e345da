"""What a forget says it erased, naming the store the home really uses: `klaw memory forget`, and
`/forget` typed in a chat (decision 403), in the same words.

On a home moved into PostgreSQL (`klaw db migrate`), the memory is the database `database.urlEnv`
names and its log is the database's own: the words name PostgreSQL (decision 394). The klaw.db and the
JSONL files under conversations/ the migrate left in KLAW_HOME are reached too (`migrated_copy.py`,
decision 539), and the forget's answer says what they held.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from klaw.config import DatabaseConfig
from klaw.home import KlawHome
from klaw.scheduling.names import SUBAGENT_CHANNEL, TASK_LOG_DIR_PREFIX, run_log_name
from klaw.store.records import ChatRef


def erased_from(database: DatabaseConfig, files_rewritten: int) -> str:
    """Where the forgotten text was erased: the SQLite home's klaw.db and log files, or PostgreSQL."""
    if database.backend == "postgres":
        return (
            f"erased from the PostgreSQL database named by {database.url_env}: its messages, search indexes,"
            " summaries and the log it keeps"
        )
    return (
        "erased from klaw.db, its search indexes and summaries, and from the conversation log"
        f" ({files_rewritten} log file(s) rewritten)"
    )


def chat_logs_removal(conversations: Path) -> str:
    """The command deleting the chats' folders under `conversations` and nothing else: the scheduled tasks'
    run logs, still the log of a PostgreSQL home's tasks, stay (newcomer12: `rm -r conversations` took them)."""
    return (
        f"find {shlex.quote(str(conversations))} -mindepth 1 -maxdepth 1 -type d"
        f" ! -name '{TASK_LOG_DIR_PREFIX}*' -exec rm -r {{}} +"
    )


@dataclass(frozen=True)
class ForgetWords:
    """A home's store, for the engine's `/forget` answer: where the text was erased."""

    home: KlawHome
    database: DatabaseConfig

    def erased_from(self, files_rewritten: int) -> str:
        return erased_from(self.database, files_rewritten)

    async def discard_build(self) -> str:
        """`discard_unfinished_build`, off the event loop (a PostgreSQL build is dropped over a connection)."""
        return await asyncio.to_thread(discard_unfinished_build, self.home, self.database)


def discard_unfinished_build(home: KlawHome, database: DatabaseConfig) -> str:
    """Discard the build an interrupted `klaw reindex` left (`<klaw.db>.reindex` and its side files, or the
    PostgreSQL schema `klaw_reindex`), and say so; empty when there is none. Called once a forget is done
    (decision 503): the build holds the forgotten text, and was read from the log as it was before the forget,
    so finishing it would be wrong anyway. Its lock file, which holds no text, is left to the next reindex."""
    from klaw.memory.reindex_leftover import reindex_leftovers
    from klaw.store.backend import rebuild_backend
    from klaw.store.protocol import StorageError

    live = home.database_file(database.path)
    build = rebuild_backend(live, database)
    try:
        if database.backend == "postgres":
            there = build.exists()
        else:  # its side files count too (a WAL holds the latest pages)
            there = any(not path.name.endswith(".lock") for path in reindex_leftovers(live))
        if not there:
            return ""
        build.discard()
    except (OSError, StorageError) as exc:
        return (
            f" The unfinished build an interrupted 'klaw reindex' left ({build.location}) may still hold it and"
            f" could not be discarded ({exc}): delete it, or run 'klaw reindex' (it starts over)."
        )
    return (
        f" The unfinished build an interrupted 'klaw reindex' left ({build.location}) held it too and was"
        " discarded: a build begun before a forget cannot be finished; run 'klaw reindex' again to start over."
    )


def tasks_left_sentence(names: Sequence[str]) -> str:
    """What a forget's answer adds about the tasks the forgotten exchange scheduled that are still
    scheduled (empty when none): they keep its words in their message and run on (decision 280)."""
    if not names:
        return ""
    listed = ", ".join(repr(name) for name in names)
    one = len(names) == 1
    return (
        f" The forgotten messages scheduled {'the task' if one else 'the tasks'} {listed}, which"
        f" {'is' if one else 'are'} still scheduled with {'its' if one else 'their'} message (forgetting does"
        f" not remove tasks). To remove {'it' if one else 'one'}: klaw schedule remove"
        f" {names[0] if one else 'NAME'}, or ask the agent to."
    )


def runs_left_sentence(names: Sequence[str]) -> str:
    """What a forget's answer adds about the subagent runs the forgotten exchange started (empty when
    none): each keeps the message it was given and its answer in its own log, and its answer is in the
    chat as a message of its own, which forgetting the exchange does not reach."""
    if not names:
        return ""
    listed = ", ".join(repr(name) for name in names)
    logs = ", ".join(
        f"conversations/{ChatRef(SUBAGENT_CHANNEL, run_log_name(n, spawned=True)).log_dir_name}/" for n in names
    )
    one = len(names) == 1
    return (
        f" The forgotten messages started {'a subagent run' if one else 'subagent runs'} {listed}:"
        f" {'its' if one else 'their'} instructions and answer are kept in {'its' if one else 'their'} own"
        f" log ({logs}), and {'its answer' if one else 'their answers'} in this chat as a message of"
        f" {'its' if one else 'their'} own, which forgetting an exchange does not reach (/forget segment does)."
    )
