"""A turn's query whose vector its message's `prepare` already made is answered at once (decision 405):
`QueryMemo` takes it from `EmbedOnce` instead of asking through a task, which cost the answer two turns
of the event loop behind whatever else was ready to run. A text not computed yet is asked as before."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

import numpy as np

from klaw.memory.embedder.embed_once import EmbedOnce
from klaw.memory.embedder.fake import FakeEmbedder
from klaw.memory.embedder.memo import QueryMemo
from klaw.memory.embedder.protocol import Vectors

MESSAGE = "where did we leave the spare key to the boathouse?"


def without_waiting(step: Coroutine[Any, Any, Vectors]) -> Vectors | None:
    """The coroutine's answer when it gives one without waiting for the event loop, else None."""
    try:
        step.send(None)
    except StopIteration as done:
        answer: Vectors = done.value
        return answer
    step.close()
    return None


async def test_a_prepared_message_is_its_turns_query_vector_at_once() -> None:
    fake = FakeEmbedder(dim=32)
    once = EmbedOnce(fake)
    memo = QueryMemo(once, deadline_seconds=2.0)
    once.prepare(MESSAGE)  # as the engine does when the message is accepted
    await once.embed([MESSAGE])  # the prepared computation has settled

    answer = without_waiting(memo.embed_queries([MESSAGE]))

    assert answer is not None
    np.testing.assert_array_equal(answer, await fake.embed([MESSAGE]))
    assert once.computed == 1  # the message was embedded once, for its storage and its query
    again = without_waiting(memo.embed([MESSAGE]))  # kept by the memo too
    assert again is not None and np.array_equal(again, answer)


async def test_a_text_not_computed_yet_is_asked_as_before() -> None:
    fake = FakeEmbedder(dim=32)
    once = EmbedOnce(fake)
    memo = QueryMemo(once, deadline_seconds=2.0)

    assert without_waiting(memo.embed(["something nobody prepared"])) is None
    np.testing.assert_array_equal(
        await memo.embed(["something nobody prepared"]), await fake.embed(["something nobody prepared"])
    )
    assert once.computed == 1
