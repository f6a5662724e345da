"""Which `Klaw` holds each home in this program, for a second `start()` on a home the first still holds.

In a notebook, `agent = Klaw(h, …); await agent.start()` run twice overwrites the variable holding the first,
whose engine still holds the home: "close it first" left nothing to close (newcomer22). So each started `Klaw`
is noted here by its home until it closes; the refusal carries it as `err.open` and names `Klaw.opened(home)`,
which finds it again (decision 513). Kept apart from library.py, whose job is the engine's life and its calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from klaw.engine.socket_file import EngineAlreadyRunningError
from klaw.engine_presence import of_another_home
from klaw.home import KlawHome
from klaw.home_lock import ENGINE_ROLE, LIBRARY, PIPED_CHAT, held_by_this_process, holder_of
from klaw.library_arguments import talk_instead

_open: dict[Path, Any] = {}  # home root → the started Klaw holding it (Any: library.py imports this module)


def noted_open(home: KlawHome, agent: object) -> None:
    """`agent` has started on `home`."""
    _open[home.root] = agent


def noted_closed(home: KlawHome, agent: object) -> None:
    """`agent` has closed (another Klaw noted on the home since is left noted)."""
    if _open.get(home.root) is agent:
        del _open[home.root]


def opened(home: KlawHome) -> Any:
    """The started Klaw of this program on `home`, or None."""
    return _open.get(home.root)


NO_PAGE = frozenset({LIBRARY, "klaw chat", PIPED_CHAT, "klaw mcp serve"})
"""The engines that serve no web page to ask them through, nor can: the refusal names the holder and its fixes
only (newcomer24: beside another library program it offered the page and `listen=True`, decision 538)."""


async def refused_start(home: KlawHome, refusal: EngineAlreadyRunningError) -> EngineAlreadyRunningError:
    """What a start refused on a held home raises: this program's own Klaw named (`already_open`),
    maintenance as it is ("wait for it to finish"), another program's `Klaw` with the two fixes that apply (end
    it, or a home of this program's own), another engine with how to ask it instead through its web page."""
    holder = holder_of(home.root)
    if held_by_this_process(home.root) or (holder and holder.role and holder.role != ENGINE_ROLE):
        return already_open(home, refusal)
    if holder is not None and holder.command == LIBRARY and not of_another_home(home, holder):
        return EngineAlreadyRunningError(f"{refusal}; or give this program a home of its own: Klaw('<another folder>')")
    if holder is not None and holder.command in NO_PAGE:
        return refusal
    return EngineAlreadyRunningError(f"{refusal}. {await talk_instead(home)}")


def already_open(home: KlawHome, refusal: EngineAlreadyRunningError) -> EngineAlreadyRunningError:
    """The refusal of a second start on a home this program's own `Klaw` holds, with that Klaw as `open`
    and the words to get it back and close it; `refusal` as it is when no Klaw of this program is noted
    (an `Engine` started directly)."""
    agent = _open.get(home.root)
    if agent is None:
        return refusal
    shown = repr(str(home.root))
    again = EngineAlreadyRunningError(
        f"cannot start: this program already has Klaw({shown}) open: use that one, or close it first."
        f" `err.open` on this error, or `Klaw.opened({shown})`, is that Klaw (a notebook cell run twice"
        f" overwrote the variable holding it): `agent = Klaw.opened({shown})` to go on with it, or"
        f" `await Klaw.opened({shown}).aclose()` to close it"
    )
    again.open = agent
    return again
