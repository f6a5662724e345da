"""Closing what runs beside the engine (the embedder's warm-up here) cancels its task and waits for it; a
cancellation of the closer itself meanwhile (a shutdown past its deadline, a second Ctrl-C) is the closer's
and goes on up. `with suppress(CancelledError): await task` took it for the task's and returned as if the
close had ended normally (decision 428): the same flaw in the docs index's stop, the MCP link's waits and
the embedders' closes, now all `cancel_and_wait`."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest

from klaw.memory.embedder.protocol import Embedder
from klaw.memory.embedder.warm_up import WarmUp

BOUND_S = 30.0


class _SlowToUnload:
    """An embedder whose load, once cancelled, takes until `unloaded` is set to end."""

    model_id = "slow/unload"

    def __init__(self) -> None:
        self.loading = asyncio.Event()
        self.unloading = asyncio.Event()
        self.unloaded = asyncio.Event()

    async def warm_up(self) -> None:
        self.loading.set()
        try:
            await asyncio.Event().wait()
        finally:
            self.unloading.set()
            await self.unloaded.wait()


async def test_a_closer_cancelled_while_the_warm_up_ends_is_cancelled() -> None:
    embedder = _SlowToUnload()
    warm = WarmUp.start(cast(Embedder, embedder))
    await asyncio.wait_for(embedder.loading.wait(), BOUND_S)
    closer = asyncio.create_task(warm.aclose())
    await asyncio.wait_for(embedder.unloading.wait(), BOUND_S)  # the close waits for the load to end

    closer.cancel()  # the closer's own cancellation arrives while it waits
    embedder.unloaded.set()

    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(closer, BOUND_S)
    assert warm.done
