"""A message `search_memory` finds can be found in `history()` (decision 538, newcomer24 item 20): its
`MemoryFound.id` was the database rowid (an int) while `HistoryEntry.id` is the message's id (a hex string), so a
program could not go from a hit to the conversation around it. Now both are the message's id. Through the fake
OpenAI server, a real home, an earlier session (`/new`) searched."""

from __future__ import annotations

from pathlib import Path

from klaw import Klaw, ManualClock
from klaw.llm.fake_server import FakeOpenAiServer


async def test_a_hit_is_the_history_entry_of_its_message(tmp_path: Path) -> None:
    async with FakeOpenAiServer() as server:
        config = {
            "embedder": {"backend": "fake", "dim": 32},
            "summarizer": {"enabled": False},
            "autoRag": {"minMessageTokens": 1},
            "models": {"stand-in/echo": {"baseUrl": server.base_url}},
            "routing": {"default": "stand-in/echo"},
        }
        async with Klaw(tmp_path / "home", config=config, clock=ManualClock()) as agent:
            await agent.ask("alice", "the spare key is under the blue flowerpot")
            await agent.ask("alice", "the bins go out on tuesday")
            await agent.ask("alice", "/new")
            await agent.ask("alice", "what was I saying?")
            await agent.engine.embedding_queue.wait_idle()
            hits = await agent.search_memory("alice", "spare key flowerpot")
            best = hits[0]
            assert best.text == "the spare key is under the blue flowerpot"
            history = await agent.history("alice", session=best.session)
            [entry] = [entry for entry in history if entry.id == best.id]
            assert (entry.text, entry.role, entry.session) == (best.text, "user", best.session)
            around = history[history.index(entry) + 1]
            assert around.text == "echo: the spare key is under the blue flowerpot"  # the reply that followed
            turn = (await agent.turns("alice", session=best.session))[0]
            assert turn.message == best.id  # a turn names its message by the same id
            assert all(isinstance(hit.id, str) for hit in hits)
