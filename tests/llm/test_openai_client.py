"""OpenAiChatClient.complete against a real HTTP server: replies, request shape, retries, errors."""

from __future__ import annotations

import asyncio
import json
import logging
import socket

import pytest

from klaw.config import ModelConfig
from klaw.llm.errors import (
    LlmAuthError,
    LlmBadRequestError,
    LlmConnectionError,
    LlmError,
    LlmMalformedResponseError,
    LlmRateLimitError,
    LlmServerError,
    LlmTimeoutError,
)
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.llm.messages import ChatMessage, ToolCall, ToolSpec
from klaw.llm.openai_client import OpenAiChatClient
from klaw.llm.protocol import ChatModel
from tests.llm.conftest import ClientFactory

SECRET_TEXT = "my bank PIN is 4711"
SECRET_KEY = "sk-test-0123456789abcdef"


async def test_scripted_text_reply(openai_server: FakeOpenAiServer, make_client: ClientFactory) -> None:
    openai_server.reply_text("Hello, human.")
    client = make_client()

    response = await client.complete([ChatMessage.user("hi")])

    assert isinstance(client, ChatModel)
    assert response.content == "Hello, human."
    assert response.tool_calls == ()
    assert response.finish_reason == "stop"
    assert response.model == "llama3.2"
    assert response.usage is not None
    assert response.usage.total_tokens == response.usage.prompt_tokens + response.usage.completion_tokens
    assert response.message == ChatMessage.assistant("Hello, human.")


async def test_empty_queue_echoes_the_last_user_message(make_client: ClientFactory) -> None:
    response = await make_client().complete([ChatMessage.user("first"), ChatMessage.user("second")])

    assert response.content == "echo: second"


async def test_tool_calls_round_trip_names_and_raw_arguments(
    openai_server: FakeOpenAiServer, make_client: ClientFactory
) -> None:
    openai_server.reply_tool_calls([("get_time", {"tz": "UTC"}), ("search", '{"q": broken json')])

    response = await make_client().complete([ChatMessage.user("time?")])

    assert response.finish_reason == "tool_calls"
    assert [(c.name, c.arguments) for c in response.tool_calls] == [
        ("get_time", '{"tz": "UTC"}'),
        ("search", '{"q": broken json'),
    ]
    assert all(c.id for c in response.tool_calls)


async def test_request_body_has_the_openai_shape(openai_server: FakeOpenAiServer, make_client: ClientFactory) -> None:
    call = ToolCall(id="call_7", name="get_time", arguments='{"tz": "UTC"}')
    messages = [
        ChatMessage.system("be brief"),
        ChatMessage.user("what time is it?"),
        ChatMessage.assistant(None, [call]),
        ChatMessage.tool("call_7", "12:00", name="get_time"),
    ]
    tool = ToolSpec("get_time", "Current time in a zone", {"type": "object", "properties": {"tz": {"type": "string"}}})

    await make_client().complete(messages, [tool], temperature=0.2, max_tokens=50)

    body = openai_server.requests[-1].body
    assert openai_server.requests[-1].path == "/v1/chat/completions"
    assert body["model"] == "llama3.2"
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "what time is it?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_7", "type": "function", "function": {"name": "get_time", "arguments": '{"tz": "UTC"}'}}
            ],
        },
        {"role": "tool", "content": "12:00", "tool_call_id": "call_7", "name": "get_time"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_time",
                "description": "Current time in a zone",
                "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}},
            },
        }
    ]
    assert body["temperature"] == 0.2
    assert body["max_tokens"] == 50
    assert "stream" not in body
    assert [ChatMessage.from_wire(m) for m in body["messages"]] == messages


async def test_optional_fields_are_left_out(openai_server: FakeOpenAiServer, make_client: ClientFactory) -> None:
    await make_client("openrouter/meta/llama-3", name="meta-llama/llama-3-8b").complete([ChatMessage.user("x")])

    body = openai_server.requests[-1].body
    assert body["model"] == "meta-llama/llama-3-8b"
    assert not {"tools", "temperature", "max_tokens"} & body.keys()


async def test_bearer_key_comes_from_the_named_env_var(
    openai_server: FakeOpenAiServer, make_client: ClientFactory
) -> None:
    client = make_client(api_key_env="TEST_API_KEY", env={"TEST_API_KEY": SECRET_KEY})

    await client.complete([ChatMessage.user("hi")])

    assert openai_server.requests[-1].headers["authorization"] == f"Bearer {SECRET_KEY}"


async def test_a_key_with_a_line_break_is_refused_by_its_variables_name_never_shown(
    openai_server: FakeOpenAiServer, make_client: ClientFactory
) -> None:
    """A key copied from a file with its newline (or one injecting a header) is refused before any request,
    naming the variable: h11 refused it with the key in its message, which reached the log and the chat."""
    client = make_client(api_key_env="TEST_API_KEY", env={"TEST_API_KEY": SECRET_KEY + "\r\nX-Injected: 1"})

    with pytest.raises(LlmAuthError, match=r"the environment variable TEST_API_KEY, .* holds a line break") as caught:
        await client.complete([ChatMessage.user("hi")])

    assert SECRET_KEY not in str(caught.value) and SECRET_KEY not in repr(caught.value.__cause__)
    assert openai_server.requests == []


async def test_no_key_configured_sends_no_auth_header(
    openai_server: FakeOpenAiServer, make_client: ClientFactory
) -> None:
    await make_client(env={"OPENAI_API_KEY": SECRET_KEY}).complete([ChatMessage.user("hi")])

    assert "authorization" not in openai_server.requests[-1].headers


async def test_missing_key_env_var_fails_before_any_request(
    openai_server: FakeOpenAiServer, make_client: ClientFactory
) -> None:
    client = make_client(api_key_env="MISSING_KEY", env={})

    with pytest.raises(LlmAuthError, match="MISSING_KEY") as caught:
        await client.complete([ChatMessage.user("hi")])

    assert openai_server.requests == []
    assert "ollama/llama3.2" in str(caught.value)


async def test_429_then_success_waits_retry_after(
    openai_server: FakeOpenAiServer, make_client: ClientFactory, sleeps: list[float]
) -> None:
    openai_server.reply_error(429, retry_after=1)
    openai_server.reply_text("finally")

    response = await make_client().complete([ChatMessage.user("hi")])

    assert response.content == "finally"
    assert sleeps == [1.0]
    assert len(openai_server.requests) == 2


async def test_retry_after_is_capped(
    openai_server: FakeOpenAiServer, make_client: ClientFactory, sleeps: list[float]
) -> None:
    openai_server.reply_error(429, retry_after=3600)

    await make_client().complete([ChatMessage.user("hi")])

    assert sleeps == [30.0]


async def test_429_without_retry_after_backs_off_with_jitter(
    openai_server: FakeOpenAiServer, make_client: ClientFactory, sleeps: list[float]
) -> None:
    openai_server.reply_error(429)
    openai_server.reply_error(429)

    await make_client(rand=lambda: 1.0).complete([ChatMessage.user("hi")])

    assert sleeps == [0.5, 1.0]  # base 0.5 s doubling; rand=1.0 is the top of the jitter range


async def test_429_every_time_raises_rate_limit_error(
    openai_server: FakeOpenAiServer, make_client: ClientFactory, sleeps: list[float]
) -> None:
    for _ in range(3):
        openai_server.reply_error(429, retry_after=2)

    with pytest.raises(LlmRateLimitError) as caught:
        await make_client(max_retries=2).complete([ChatMessage.user("hi")])

    assert caught.value.retry_after == 2.0
    assert caught.value.status == 429
    assert len(openai_server.requests) == 3
    assert sleeps == [2.0, 2.0]


async def test_500_every_time_raises_server_error_after_all_attempts(
    openai_server: FakeOpenAiServer, make_client: ClientFactory, sleeps: list[float]
) -> None:
    for _ in range(4):
        openai_server.reply_error(500)

    with pytest.raises(LlmServerError, match="HTTP 500") as caught:
        await make_client(max_retries=3, rand=lambda: 0.0).complete([ChatMessage.user("hi")])

    assert len(openai_server.requests) == 4
    assert sleeps == [0.25, 0.5, 1.0]  # exponential; rand=0.0 is the bottom of the jitter range
    assert caught.value.model_id == "ollama/llama3.2"
    assert caught.value.base_url == openai_server.base_url


async def test_500_then_success(
    openai_server: FakeOpenAiServer, make_client: ClientFactory, sleeps: list[float]
) -> None:
    openai_server.reply_error(502)
    openai_server.reply_text("recovered")

    response = await make_client().complete([ChatMessage.user("hi")])

    assert response.content == "recovered"
    assert len(sleeps) == 1


async def test_zero_retries_means_one_attempt(
    openai_server: FakeOpenAiServer, make_client: ClientFactory, sleeps: list[float]
) -> None:
    openai_server.reply_error(503)

    with pytest.raises(LlmServerError):
        await make_client(max_retries=0).complete([ChatMessage.user("hi")])

    assert len(openai_server.requests) == 1
    assert sleeps == []


async def test_connection_refused_raises_connection_error_after_retries() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago and has no listener now
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    delays: list[float] = []

    async def sleep(seconds: float) -> None:
        delays.append(seconds)

    config = ModelConfig(base_url=f"http://127.0.0.1:{port}/v1", max_retries=2)
    client = OpenAiChatClient("local/model", config, sleep=sleep, env={})
    try:
        with pytest.raises(LlmConnectionError, match="3 attempt") as caught:
            await client.complete([ChatMessage.user(SECRET_TEXT)])
    finally:
        await client.aclose()

    assert len(delays) == 2
    assert f"127.0.0.1:{port}" in str(caught.value)


async def test_a_server_that_never_accepts_is_given_up_on_at_the_connect_timeout() -> None:
    """Packets dropped (here: a listener whose backlog is full, so its SYNs go unanswered): each attempt
    used to wait the whole timeoutSeconds (120 s by default, 4 attempts); connecting now has its own,
    short limit, and a model that is slow to answer still gets all of timeoutSeconds."""
    with socket.socket() as full:
        full.bind(("127.0.0.1", 0))
        full.listen(0)
        filler = socket.create_connection(full.getsockname())  # takes the one place in the queue
        delays: list[float] = []

        async def sleep(seconds: float) -> None:
            delays.append(seconds)

        address = f"127.0.0.1:{full.getsockname()[1]}"
        config = ModelConfig(
            base_url=f"http://{address}/v1", timeout_seconds=300, connect_timeout_seconds=0.3, max_retries=1
        )
        client = OpenAiChatClient("local/model", config, sleep=sleep, env={})
        try:
            with pytest.raises(LlmConnectionError, match=r"did not answer within 0.3 seconds \(timed out\)") as caught:
                # Well under timeoutSeconds: on the old code this wait ran out first.
                await asyncio.wait_for(client.complete([ChatMessage.user("hi")]), timeout=60)
        finally:
            await client.aclose()
            filler.close()
    assert len(delays) == 1  # retried, as a failure to connect is
    assert address in str(caught.value)


async def test_malformed_json_raises_malformed_response_error(
    openai_server: FakeOpenAiServer, make_client: ClientFactory, sleeps: list[float]
) -> None:
    openai_server.reply_malformed()

    with pytest.raises(LlmMalformedResponseError, match="not valid JSON"):
        await make_client().complete([ChatMessage.user("hi")])

    assert len(openai_server.requests) == 1
    assert sleeps == []


@pytest.mark.parametrize(
    "body",
    [{"object": "list"}, {"choices": []}, {"choices": [{"message": {"role": "assistant", "content": 42}}]}, [1, 2]],
)
async def test_json_of_the_wrong_shape_is_malformed(
    openai_server: FakeOpenAiServer, make_client: ClientFactory, body: object
) -> None:
    openai_server.reply_raw(json.dumps(body))

    with pytest.raises(LlmMalformedResponseError, match="not a chat completion"):
        await make_client().complete([ChatMessage.user("hi")])


async def test_error_in_a_200_body_is_a_server_error(
    openai_server: FakeOpenAiServer, make_client: ClientFactory
) -> None:
    openai_server.reply_raw(json.dumps({"error": {"message": "upstream provider failed", "code": 502}}))

    with pytest.raises(LlmServerError, match="upstream provider failed"):
        await make_client().complete([ChatMessage.user("hi")])


@pytest.mark.parametrize("streamed", [False, True])
async def test_an_error_in_a_200_body_that_quotes_the_prompt_is_left_out(
    openai_server: FakeOpenAiServer, make_client: ClientFactory, streamed: bool
) -> None:
    error = {"error": {"message": f"moderation rejected {SECRET_TEXT!r}", "code": 400}}
    if streamed:  # OpenRouter reports a failure mid-stream as an SSE chunk
        openai_server.reply_raw(f"data: {json.dumps(error)}\n\n", content_type="text/event-stream")
    else:
        openai_server.reply_raw(json.dumps(error))
    client = make_client()

    async def ask() -> None:
        if streamed:
            async for _ in client.stream([ChatMessage.user(SECRET_TEXT)]):
                pass
        else:
            await client.complete([ChatMessage.user(SECRET_TEXT)])

    with pytest.raises(LlmServerError) as caught:
        await ask()
    assert SECRET_TEXT not in str(caught.value)
    assert "the server's message quotes the request and is left out" in str(caught.value)


async def test_hang_past_the_timeout_raises_timeout_without_retrying(
    openai_server: FakeOpenAiServer, make_client: ClientFactory, sleeps: list[float]
) -> None:
    openai_server.reply_hang()

    with pytest.raises(LlmTimeoutError, match=r"0\.2 s"):
        await make_client(timeout_seconds=0.2).complete([ChatMessage.user("hi")])

    assert len(openai_server.requests) == 1
    assert sleeps == []


async def test_401_is_an_auth_error_naming_the_env_var(
    openai_server: FakeOpenAiServer, make_client: ClientFactory, sleeps: list[float]
) -> None:
    openai_server.reply_error(401)
    client = make_client(api_key_env="OPENAI_API_KEY", env={"OPENAI_API_KEY": SECRET_KEY})

    with pytest.raises(LlmAuthError, match="OPENAI_API_KEY") as caught:
        await client.complete([ChatMessage.user("hi")])

    assert caught.value.status == 401
    assert "Incorrect API key provided" in str(caught.value)
    assert sleeps == []


async def test_403_without_a_key_says_to_configure_one(
    openai_server: FakeOpenAiServer, make_client: ClientFactory
) -> None:
    openai_server.reply_error(403)

    with pytest.raises(LlmAuthError, match="apiKeyEnv"):
        await make_client().complete([ChatMessage.user("hi")])


async def test_unknown_model_is_a_bad_request_with_the_server_message(make_client: ClientFactory) -> None:
    async with FakeOpenAiServer(known_models=["llama3.2"]) as server:
        client = make_client("ollama/nope", base_url=server.base_url)

        with pytest.raises(LlmBadRequestError, match="The model `nope` does not exist") as caught:
            await client.complete([ChatMessage.user("hi")])

        assert caught.value.status == 404
        assert len(server.requests) == 1


async def test_400_is_a_bad_request_and_not_retried(
    openai_server: FakeOpenAiServer, make_client: ClientFactory, sleeps: list[float]
) -> None:
    openai_server.reply_error(400, message="This model's maximum context length is 8192 tokens.")

    with pytest.raises(LlmBadRequestError, match="maximum context length"):
        await make_client().complete([ChatMessage.user("hi")])

    assert sleeps == []


async def test_invalid_base_url_is_a_configuration_error() -> None:
    # engine.yaml refuses it (tests/config/test_base_url.py); a program building the model unchecked is still told
    client = OpenAiChatClient("m", ModelConfig.model_construct(base_url="localhost:11434/v1"), env={})

    with pytest.raises(LlmBadRequestError, match="baseUrl"):
        await client.complete([ChatMessage.user("hi")])
    await client.aclose()


@pytest.mark.parametrize("failure", ["401", "400", "429", "500", "malformed", "hang", "400 echo", "500 echo"])
async def test_errors_and_logs_never_contain_content_or_key(
    failure: str, openai_server: FakeOpenAiServer, make_client: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    if failure == "malformed":
        openai_server.reply_malformed()
    elif failure == "hang":
        openai_server.reply_hang()
    elif failure.endswith(" echo"):  # a server whose error message quotes the prompt back
        for _ in range(2):
            openai_server.reply_error(int(failure.split()[0]), message=f"cannot tokenize {SECRET_TEXT!r} here")
    else:
        for _ in range(2):
            openai_server.reply_error(int(failure))
    client = make_client(
        api_key_env="OPENAI_API_KEY", env={"OPENAI_API_KEY": SECRET_KEY}, max_retries=1, timeout_seconds=0.2
    )
    caplog.set_level(logging.DEBUG, logger="klaw")

    with pytest.raises(LlmError) as caught:
        await client.complete([ChatMessage.system(SECRET_TEXT), ChatMessage.user(SECRET_TEXT)])

    texts = [str(caught.value), repr(caught.value), caplog.text]
    assert SECRET_KEY in json.dumps(openai_server.requests[-1].headers)  # the key was really sent
    for text in texts:
        assert SECRET_TEXT not in text
        assert SECRET_KEY not in text


async def test_an_answer_cut_off_midway_is_said_in_words_not_an_httpx_class_name() -> None:
    """Before: "the connection broke while reading the response: RemoteProtocolError", a Python class a
    person cannot act on. A server that promises 1,000 bytes, sends 20 and closes."""

    async def cut_short(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
        writer.write(b'{"choices": [{"mess')
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(cut_short, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = OpenAiChatClient("local/model", ModelConfig(base_url=f"http://127.0.0.1:{port}/v1"), env={})
    try:
        with pytest.raises(LlmConnectionError) as caught:
            await client.complete([ChatMessage.user("hi")])
    finally:
        await client.aclose()
        server.close()
    said = str(caught.value)
    assert "the answer broke off: the server closed the connection before its answer was complete" in said, said
    assert "Check the server's logs: it may have crashed or run out of memory" in said
    assert "Error" not in said.replace("LlmConnectionError", ""), said


async def test_a_server_answering_json_of_another_shape_is_told_in_json_words(
    openai_server: FakeOpenAiServer, make_client: ClientFactory
) -> None:
    """Before: "choices is a dict, not a JSON array", Python's name for a JSON object."""
    openai_server.reply_raw(json.dumps({"choices": {"message": "hi"}}))
    with pytest.raises(LlmMalformedResponseError) as caught:
        await make_client().complete([ChatMessage.user("hi")])
    assert "is a JSON object, not a JSON array" in str(caught.value) and "dict" not in str(caught.value)
