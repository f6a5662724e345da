"""The turn bench's stored chat, written as the engine leaves a chat of that many messages (decision 434).

A real chat gets, every turn: the person's message, an `exchange_open` record, the reply, an
`exchange_close` record (the store folds both into `exchanges`, and the reply into
`undelivered_replies` until the channel shows it), and later the exchange's summary (an
`exchange_summary` record, folded into `summaries` with its embedding job) and every few exchanges a
rolling `segment_summary` of the open segment. The bench used to write the messages alone, so its first
timed turn's exchange held every stored user message (50,004 at 100k: ~1 s to read and ~0.6 s of the
summary fold's checks on the database thread, behind which the timed turns' writes waited) and the
summarizers would have had nothing, or everything, to catch up on.

So the fill writes those records, in the store's own append (its folds build the rows; on PostgreSQL
the bulk form in `pg_fill.py`, which runs the same folds), every reply marked delivered, and one rolling
segment summary at the end covering every exchange (a real chat's earlier rolling versions are
replaced rows; only their log records would differ). The text is Zipfian (`corpus.py`, seeded), so
full-text search meets a vocabulary with a long tail as a person's chat has, and the timed turns ask
varied questions drawn from the same vocabulary (`questions`), the same on every run: a repeated
question made its words common after ~167 turns, and the common-word filter then excluded nothing
(decision 433).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from klaw.bench.corpus import MESSAGE_SPACING_S, ZipfCorpus
from klaw.store.exchange_records import exchange_close_record, exchange_open_record
from klaw.store.records import ChatRef, ExchangeStatus, MessageRecord, Role
from klaw.store.summaries.log_records import exchange_summary_record, segment_summary_record

FILL_SEED = 19  # the stored chat's text
QUESTION_SEED = 434  # the timed turns' questions, drawn from the same vocabulary
FILL_MODEL = "bench/fill"  # the `model` the fill's summaries name
ROLLING_SOURCES = 6  # exchange summaries a rolling segment summary folds in (`summarizer.rollingEvery`)
# the bench's JSON `bench_version`: 2 = exchanges, summaries, Zipfian text, varied questions; 3 = and every
# stored message's vector (decision 493)
BENCH_VERSION = 3


def questions(count: int, seed: int = QUESTION_SEED) -> list[str]:
    """The timed turns' questions: Zipfian sentences of the fill's vocabulary, the same for a seed."""
    corpus = ZipfCorpus(seed=FILL_SEED).redrawn(seed)
    return [f"{corpus.sentence(6, 20)}?" for _ in range(count)]


@dataclass
class TurnFill:
    """Writes a chat's `stored` conversation messages as turns, batch by batch; `first_exchange` is the
    id the store gives the next exchange (`exchanges.high_water() + 1`)."""

    chat: ChatRef
    start: datetime
    first_exchange: int
    corpus: ZipfCorpus = field(default_factory=lambda: ZipfCorpus(seed=FILL_SEED))
    written: int = 0  # conversation messages so far
    exchanges: int = 0
    _last_open: MessageRecord | None = None  # the newest summarized exchange's opening
    _summaries: list[str] = field(default_factory=list)  # the last few exchange summaries' record ids

    def batch(self, messages: int) -> tuple[list[MessageRecord], list[str]]:
        """The records of the next `messages` conversation messages (whole turns; a lone last message is
        a turn that failed, as a turn the model could not answer leaves it), ending with the segment's
        rolling summary so far (appended together, the segment summarizer never finds the summaries
        unfolded), and the ids of their replies."""
        records: list[MessageRecord] = []
        replies: list[str] = []
        end = self.written + messages
        while self.written < end:
            asked = self._at(self.written)
            user = MessageRecord(self.chat, Role.USER, self.corpus.sentence(), created_at=asked)
            opened = exchange_open_record(self.chat, user.id, asked, self.first_exchange + self.exchanges)
            self.exchanges += 1
            records += [user, opened]
            if self.written + 1 == end:
                records.append(exchange_close_record(opened, ExchangeStatus.FAILED, None, asked))
                self.written += 1
                continue
            answered = self._at(self.written + 1)
            reply = MessageRecord(self.chat, Role.ASSISTANT, self.corpus.sentence(), created_at=answered)
            close = exchange_close_record(opened, ExchangeStatus.COMPLETED, reply.id, answered)
            summary = exchange_summary_record(
                self.chat,
                self.corpus.sentence(8, 24),
                exchange=opened.id,
                sources=[user.id, reply.id],
                model=FILL_MODEL,
                at=answered,
            )
            records += [reply, close, summary]
            replies.append(reply.id)
            self._summaries = [*self._summaries[-(ROLLING_SOURCES - 1) :], summary.id]
            self._last_open = opened
            self.written += 2
        rolling = self._segment_summary()
        return records + ([] if rolling is None else [rolling]), replies

    def _segment_summary(self) -> MessageRecord | None:
        """The open segment's rolling summary as the segment summarizer leaves it: covering every exchange
        so far (none when no exchange was summarized)."""
        if self._last_open is None or not self._summaries:
            return None
        return segment_summary_record(
            self.chat,
            self.corpus.sentence(20, 40),
            covers=self._last_open.id,
            final=False,
            exchanges_covered=self.exchanges,
            sources=self._summaries,
            model=FILL_MODEL,
            at=self._at(self.written),
        )

    def _at(self, message: int) -> datetime:
        return self.start + timedelta(seconds=MESSAGE_SPACING_S * message)
