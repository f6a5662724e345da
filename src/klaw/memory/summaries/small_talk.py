"""Exchanges with nothing to remember, summarized by a rule instead of a model call.

"hi" → "Hello! How are you?", "thanks!" → "You're welcome.": a quarter of a personal chat, and a
model call each would only say so in more words. An exchange is small talk when everything the
person wrote is small talk or function words (`word_evidence.is_small_talk`, the notion recall
already uses), no tool ran, and the final reply is short. Its summary then retells it verbatim,
so nothing it said is lost (a short reply may still hold a word worth finding), and it is logged
like any other exchange summary, under the model id `SMALL_TALK_MODEL`: the segment fold, the past
conversations and `klaw reindex` treat it as they treat the others. Text in a language whose small
talk the list does not know is never taken for small talk (the model summarizes it).
"""

from __future__ import annotations

from klaw.llm.tokens import approximate_token_count
from klaw.memory.summaries.prompts import Transcript, clip
from klaw.memory.word_evidence import is_small_talk

SMALL_TALK_MODEL = "klaw/small-talk"
MAX_REPLY_TOKENS = 40  # a longer reply may carry something worth a real summary
MAX_QUOTE_TOKENS = 40


def small_talk_summary(transcript: Transcript) -> str | None:
    """The rule's summary of a small-talk exchange; None when the exchange needs the model."""
    if transcript.tools or not transcript.question or not is_small_talk(transcript.question):
        return None
    if approximate_token_count(transcript.reply) > MAX_REPLY_TOKENS:
        return None
    question = clip(" ".join(transcript.question.split()), MAX_QUOTE_TOKENS)
    reply = " ".join(transcript.reply.split())
    if not reply:
        return f'Small talk: the person wrote "{question}".'
    return f'Small talk: the person wrote "{question}" and the assistant replied "{reply}".'
