"""`TurnGate`'s bound is a turn's, not each summary's (adversary19): a batch of six exchange summaries of a
chat whose turn stays open (a held approval, a long code_execute) made the one summary worker wait 6 × 0.5 s
a batch, and every other chat's summaries with it. Once a summary waited a turn out, the rest go at once."""

from __future__ import annotations

import asyncio

from klaw.memory.turn_gate import TurnGate
from klaw.store.records import ChatRef

CHAT = ChatRef("web", "main")


async def test_a_turn_waited_out_once_is_not_waited_for_again_but_the_next_turn_is() -> None:
    gate = TurnGate()
    with gate.turn(CHAT):  # a turn held open
        await gate.between_turns(CHAT, bound=0.01)  # the first summary waits, then goes
        async with asyncio.timeout(5):  # the batch's next summaries would each wait the minute
            for _ in range(5):
                await gate.between_turns(CHAT, bound=60)
    with gate.turn(CHAT):  # a new turn: summaries wait for it again
        waiting = asyncio.ensure_future(gate.between_turns(CHAT, bound=60))
        await asyncio.sleep(0.05)
        assert not waiting.done()
    async with asyncio.timeout(5):
        await waiting  # the turn ended
