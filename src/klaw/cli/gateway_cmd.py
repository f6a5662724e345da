"""`klaw gateway` (the channels, talking to a running engine) and `klaw serve` (engine and gateway together).

`klaw serve` runs both in one process, still talking over `engine.sock` exactly as two processes
would. On SIGTERM/SIGINT the engine stops first, while the gateway is still connected to receive
the replies of the turns it finishes; messages arriving meanwhile stay in the gateway's buffer for
the next start. Then the gateway stops.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from contextlib import nullcontext
from typing import TYPE_CHECKING

from klaw import event_loop
from klaw.cancellation import take_back_cancellation
from klaw.cli.context import (
    fail,
    home_from_env,
    load_or_exit,
    start_engine_or_exit,
    stderr_console,
    stdout_console,
)
from klaw.cli.model_at_start import cancelled_on_failure, check_in_background, say_check
from klaw.cli.stopping import say_starting, stopped_as_by_ctrl_c_while_starting, stopping
from klaw.home import KlawHome

if TYPE_CHECKING:  # the channels, the gateway and the engine load only when a command runs (cli/app.py)
    from klaw.config_loader import LoadedConfig
    from klaw.engine.runtime import Engine
    from klaw.gateway.service import Channel


def gateway() -> None:
    """Run the channels (web page, Telegram) and forward them to the engine over engine.sock."""
    with stopped_as_by_ctrl_c_while_starting():
        home = home_from_env()
        loaded = load_or_exit(home)
        event_loop.run(_run(home, loaded, with_engine=False))


def serve() -> None:
    """Run the engine and the gateway (web page, Telegram) together in this process."""
    with stopped_as_by_ctrl_c_while_starting():
        home = home_from_env()
        loaded = load_or_exit(home)
        say_starting("klaw serve", home)
        event_loop.run(_run(home, loaded, with_engine=True))


def telegram_token_problem(enabled: bool, token_env: str) -> str | None:
    """Why `klaw serve` and `klaw gateway` refuse to start Telegram from this shell (its token variable is
    empty), or None; `klaw config check` says the same sentence."""
    if not enabled or os.environ.get(token_env, "").strip():
        return None
    return (
        f"channels.telegram is enabled but the environment variable {token_env} is empty;"
        " put the bot token from @BotFather there (channels.telegram.tokenEnv names the variable; a service run by"
        " 'klaw service' reads it from KLAW_HOME/service.env)"
    )


def build_channels(home: KlawHome, loaded: LoadedConfig) -> list[Channel]:
    """The enabled channels; exits with what to set when one cannot run (a missing bot token)."""
    from klaw.channels.web.channel import WebChannel

    config = loaded.config.channels
    channels: list[Channel] = []
    if config.web.enabled:
        channels.append(WebChannel(home, config.web, loaded))
    if config.telegram.enabled:
        if (missing := telegram_token_problem(config.telegram.enabled, config.telegram.token_env)) is not None:
            fail(missing)
        from klaw.channels.telegram import TelegramChannel  # python-telegram-bot: ~0.2 s of CPU, only for it

        token = os.environ.get(config.telegram.token_env, "").strip()
        channels.append(TelegramChannel(config.telegram, token, commands=loaded.config.commands))
    if not channels:
        fail("no channel is enabled: set channels.web.enabled or channels.telegram.enabled in engine.yaml")
    return channels


async def _run(home: KlawHome, loaded: LoadedConfig, *, with_engine: bool) -> None:
    from klaw.gateway.link import Backoff
    from klaw.gateway.service import Gateway

    console = stderr_console()
    channels = build_channels(home, loaded)
    engine: Engine | None = None
    checking = None
    if with_engine:
        checking = check_in_background(loaded, "klaw serve")
        with cancelled_on_failure(checking):
            engine = await start_engine_or_exit(home, loaded)
    running = Gateway(home, channels, backoff=Backoff(maximum=loaded.config.channels.engine_reconnect_max_seconds))
    try:
        with cancelled_on_failure(checking) if checking is not None else nullcontext():
            await running.start()
    except Exception as exc:  # a port in use, a rejected bot token: say which, not a traceback
        await running.stop()
        if engine is not None:
            await engine.shutdown()
        fail(f"the gateway could not start: {exc}")
    except asyncio.CancelledError:
        # Ctrl-C or SIGTERM while the channels start (decision 431): the engine that has started stops in
        # order, as after the start (it was left to the loop's close, its files open). The cancel is taken
        # back for the shutdown (parts ask `cancelling()`), and given again so asyncio.run says interrupted.
        take_back_cancellation()
        await running.stop()
        if engine is not None:
            await engine.shutdown()
        raise
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        _announce(home, channels, with_engine)
        if checking is not None:
            await say_check(checking, console, stop)
        await stop.wait()
        stopping(engine, console)
    finally:
        if engine is not None:
            running.engine_stopping()
            await engine.shutdown()
        await running.stop()


def _announce(home: KlawHome, channels: list[Channel], with_engine: bool) -> None:
    """Say where things are. The token is shown only to a person at a terminal: when stdout is a pipe or
    a file (systemd's journal, a log), it would be kept where others may read it, so only its file is named."""
    from klaw.channels.web.channel import WebChannel

    out = stdout_console(highlight=False)
    out.print(f"klaw {'engine and gateway' if with_engine else 'gateway'} running (engine socket {home.socket_path})")
    for channel in channels:
        if isinstance(channel, WebChannel):
            out.print(f"web page: {channel.shown_url}")
            if channel.shown_url != channel.url:
                out.print(f"  (listening on {channel.url} for it: channels.web.publishedUrl)")
            if sys.stdout.isatty():
                out.print(f"access token: {channel.token}  (also in {home.web_token_file})")
            else:
                out.print(f"access token: in {home.web_token_file} (not printed: output is not a terminal)")
        else:
            from klaw.channels.telegram import TelegramChannel  # loaded already: build_channels made it

            out.print(f"{channel.name}: {channel.state if isinstance(channel, TelegramChannel) else 'polling'}")
