"""newcomer9: `forget memory ID` said "Forgot memory …: 2 message(s), 1 saved memory", and the person's own
"please remember that my locker code is …" stayed in search and the log, unsaid. The answer now says what
the 2 messages were, that the message that asked is kept, in which exchange, and the command that erases
it. A real engine over the fake OpenAI server, whose model saves what it is asked to remember."""

from __future__ import annotations

import re
from pathlib import Path

from tests.engine.harness import CHAT, running_engine
from tests.engine.test_stable_memory_ids import LOCKER, command, memories_shown, model_that_saves


async def test_forgetting_a_memory_names_the_message_that_asked_for_it_and_how_to_erase_it(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        h.server.default_reply = model_that_saves
        await h.turn("the weather is nice today")
        await h.turn(f"please remember {LOCKER}")
        [memory_id] = (await memories_shown(h)).values()
        answer = await command(h, f"/forget memory {memory_id}")
        assert "2 message(s) (the memory_save call and its result), 1 saved memory" in answer, answer
        found = re.search(
            r"but not the message that asked for it, which stays in exchange (\d+), in search and the log", answer
        )
        assert found, answer
        exchange = found[1]
        assert f"klaw memory forget exchange {exchange}, or /forget exchange {exchange} in the chat" in answer
        # newcomer18: "…(…, erases that whole turn) erased from klaw.db…" read as the parenthesis's own words
        assert "erases that whole turn). It is erased from klaw.db, its search indexes and summaries" in answer, answer
        await h.engine.embedding_queue.wait_idle()
        assert any(LOCKER in hit.text for hit in await h.engine.chats.search_memory(CHAT, "locker corridor"))
        erased = await command(h, f"/forget exchange {exchange}")
        assert erased.startswith(f"Forgot exchange {exchange}"), erased
        assert all(LOCKER not in hit.text for hit in await h.engine.chats.search_memory(CHAT, "locker corridor"))
