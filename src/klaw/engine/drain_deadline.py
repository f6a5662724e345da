"""The deadline of a shutdown's drain, which a second Ctrl-C brings forward to now.

`Engine.shutdown` waits up to its timeout for the turns and task runs in flight; `klaw serve` and
`klaw engine` install their own SIGINT handler, so a second Ctrl-C used to change nothing and the
person waited for the reply (up to the model's timeoutSeconds). `now()` ends every drain as its
timeout would: the turns are cancelled, what they were writing is stored, and their messages, accepted
and durable, are answered at the next start (the processor's resume).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class DrainDeadline:
    def __init__(self) -> None:
        self._timeouts: list[asyncio.Timeout] = []
        self.hurried = False

    @contextlib.asynccontextmanager
    async def within(self, seconds: float) -> AsyncIterator[None]:
        """`asyncio.timeout(seconds)`, ended at once by `now()` (already, if it was called before)."""
        async with asyncio.timeout(0 if self.hurried else seconds) as timeout:
            self._timeouts.append(timeout)
            try:
                yield
            finally:
                self._timeouts.remove(timeout)

    def now(self) -> None:
        self.hurried = True
        moment = asyncio.get_running_loop().time()
        for timeout in self._timeouts:
            if not timeout.expired():
                timeout.reschedule(moment)
