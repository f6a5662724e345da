"""A whole running stack for channel tests: fake OpenAI server, engine on a real socket, gateway.

The engine runs on the real clock with a short debounce, as `klaw serve` would, in this process;
KLAW_HOME lives under /tmp because a Unix socket path must stay under ~107 bytes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from klaw.config import EngineConfig
from klaw.config_loader import LoadedConfig
from klaw.engine.runtime import Engine
from klaw.gateway.link import Backoff
from klaw.gateway.service import Channel, Gateway
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from tests.engine import short_socket_dir
from tests.engine.harness import engine_config


@dataclass
class Stack:
    home: KlawHome
    server: FakeOpenAiServer
    engine: Engine
    gateway: Gateway
    loaded: LoadedConfig


def loaded_config(config: EngineConfig, home: KlawHome) -> LoadedConfig:
    return LoadedConfig(config=config, sources={}, path=home.config_file)


@asynccontextmanager
async def running_stack(make_channels: Any, *, debounce_ms: int = 20, **overrides: Any) -> AsyncIterator[Stack]:
    """`make_channels(home, loaded, fake_openai_server) -> Sequence[Channel]` builds the gateway's channels."""
    with short_socket_dir() as directory:
        home = KlawHome(directory / "home")
        initialise_home(home)
        async with FakeOpenAiServer() as server:
            config = engine_config(server.base_url, processing={"debounceMs": debounce_ms}, **overrides)
            loaded = loaded_config(config, home)
            engine = await Engine.start(home, config)
            channels: Sequence[Channel] = make_channels(home, loaded, server)
            gateway = Gateway(home, channels, backoff=Backoff(initial=0.05, maximum=0.5))
            try:
                await gateway.start()
                async with asyncio.timeout(10):
                    await gateway.link.connected.wait()
                yield Stack(home, server, engine, gateway, loaded)
            finally:
                await engine.shutdown(timeout_seconds=5)
                await gateway.stop()
