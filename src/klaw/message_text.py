"""What a person's message may be, for every channel: text a log can hold, not blank, at most `MAX_MESSAGE_CHARS`.

One rule, checked by `Engine.submit` before anything is stored (the console, the socket's gateways
and the library's `Klaw.ask` all come through it), and reused where a channel can answer sooner:
the web page's 422, the socket's frames, `klaw chat`'s piped input. Before, only the web page
refused: a lone surrogate (undecodable bytes piped into `klaw chat`) reached the conversation log,
whose UTF-8 encode failed with a traceback, and a 1 MB message went to a model with a 7,200-token
budget. At the top level: the engine, the channels and the CLI all ask it. Decision:
docs/decisions/240-bad-input-at-the-engine.md.
"""

from __future__ import annotations

from klaw import strict_json
from klaw.errors import KlawError

MAX_MESSAGE_CHARS = 100_000
"""The longest message klaw takes (the web page's cap since it had one): about 25,000 tokens,
more than any default context budget holds; longer text belongs in a file the agent reads."""

LONE_SURROGATE = (
    "holds a lone surrogate (\\ud800 to \\udfff), which is not Unicode text; remove it"
    " (it usually comes from text cut in the middle of an emoji, or bytes that are not UTF-8)"
)

EMPTY = "is empty (nothing but spaces or line breaks): write some text to send"
"""Refused at the engine too (decision 249): every channel skips or refuses it already (the console's
blank line, the web page's 422, Telegram's photos get a note), so only a program's `ask("")` reached
the model: a call and a stored message for nothing. No channel sends attachments without text."""


class MessageRefused(KlawError, ValueError):
    """A message klaw will not take; nothing of it was stored. The message says what is wrong and how
    to fix it, never quoting the text."""


class IdUsedForAnotherText(MessageRefused):
    """A message sent under an id the chat's stored message already has, with other words (a web page's
    `client_id` reused, two posts racing: decision 503). A resend must keep its text; the stored one stays,
    this one is refused for good (the `other_text` error code), checked where the id is accepted."""

    def __init__(self, record_id: str) -> None:
        super().__init__(f"the id {record_id[:64]!r} was already used for a message with other words")


def message_problem(text: str) -> str | None:
    """Why `text` cannot be a message ("holds a lone surrogate …", "is 120,000 characters …"), or None."""
    if not isinstance(text, str):  # a program's `ask(chat, 42)`: the type is all there is to say
        return f"must be text (a str), not {type(text).__name__}"
    if not text.strip():
        return EMPTY
    if len(text) > MAX_MESSAGE_CHARS:
        return (
            f"is {len(text):,} characters, more than the {MAX_MESSAGE_CHARS:,} a message may hold;"
            " send a shorter part, or put the text in a file in the workspace and ask the agent to read it"
        )
    if not strict_json.is_text(text):
        return LONE_SURROGATE
    return None


def check_message(text: str) -> None:
    """Raise `MessageRefused` ("the message …") when `text` cannot be a message."""
    problem = message_problem(text)
    if problem is not None:
        raise MessageRefused(f"the message {problem}")
