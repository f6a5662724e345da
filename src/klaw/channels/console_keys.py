"""Keys typed while the model thinks (or klaw starts), in `klaw chat`: Ctrl-D still means leave, the rest
waits for the prompt.

Between two prompts the terminal is in canonical mode, where Ctrl-D on an empty line is the kernel's
end-of-file marker for a read nobody makes: it vanished when prompt_toolkit switched to raw mode for the
next prompt, so a person who pressed Ctrl-D during the spinner to leave stayed. While a reply is
awaited the terminal is now in cbreak mode (no echo, no line buffering; signals kept, so Ctrl-C still
interrupts as before) and what arrives is collected: Ctrl-D before anything else means "leave after
this reply"; everything else is handed to the next prompt as if typed there (keys included: a typed
Enter sends the line). The same holds while `klaw chat` starts (the model check, the engine's start):
in line mode the kernel keeps at most 4,095 characters of a line, so a paste made then was cut and sent.
"""

from __future__ import annotations

import asyncio
import codecs
import os
import sys
import termios
import tty
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # prompt_toolkit is imported when a prompt is drawn, never by a piped chat (decision 316)
    from prompt_toolkit.key_binding.key_processor import KeyProcessor

END_OF_INPUT = "\x04"  # Ctrl-D


class KeysWhileThinking:
    def __init__(self) -> None:
        self.leave = False
        self._typed: list[str] = []
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    @contextmanager
    def watching(self) -> Iterator[None]:
        """Collect keys until the block ends; a no-op when stdin is not a terminal."""
        if not sys.stdin.isatty():
            yield
            return
        fd = sys.stdin.fileno()
        saved = termios.tcgetattr(fd)
        loop = asyncio.get_running_loop()
        tty.setcbreak(fd, termios.TCSANOW)
        loop.add_reader(fd, self._read, fd)
        try:
            yield
        finally:
            loop.remove_reader(fd)
            termios.tcsetattr(fd, termios.TCSANOW, saved)

    def replay(self, processor: KeyProcessor) -> None:
        """Feed what was typed to the prompt now starting (call it from the prompt's `pre_run`)."""
        from prompt_toolkit.input.vt100_parser import Vt100Parser
        from prompt_toolkit.key_binding import KeyPress

        text, self._typed = "".join(self._typed), []
        if not text:
            return
        keys: list[KeyPress] = []
        parser = Vt100Parser(keys.append)
        parser.feed(text)
        parser.flush()
        processor.feed_multiple(keys)
        processor.process_keys()

    def _read(self, fd: int) -> None:
        data = os.read(fd, 1024)
        if not data:  # the terminal hung up: nobody is left to talk to
            self.leave = True
            asyncio.get_running_loop().remove_reader(fd)
            return
        if self.leave:
            return
        text = self._decoder.decode(data)
        if not self._typed and text.startswith(END_OF_INPUT):
            self.leave = True  # as at an empty prompt; later, prompt_toolkit gives Ctrl-D its meaning
            return
        self._typed.append(text)
