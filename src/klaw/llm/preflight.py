"""Before a person starts chatting: is the routed model reachable? If not, say what to configure.

A GET of `{baseUrl}/models` is answered by OpenAI, Ollama, vLLM, llama.cpp and OpenRouter alike and
costs no tokens. The answer is a message naming the env var or `engine.yaml` key to change, with an
Ollama example, instead of a traceback on the first turn. An answer that may be a wrong path or a server
without that route (a 404 page) is a doubt: said, and the chat goes on (decision 416).
"""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from klaw.config import ModelConfig
from klaw.llm.answer_cap import excerpt
from klaw.llm.endpoint import Endpoint, auth_headers, chat_path_in_base_url, key_problem, model_endpoint
from klaw.llm.http_client import new_http_client
from klaw.llm.proxy import proxy_for
from klaw.llm.unreachable import what_happened
from klaw.llm.wrong_scheme import TLS_ANSWERED, TLS_WORDS, tls_port_answer, with_scheme, wrong_scheme
from klaw.redaction import mask_url_credentials

CHECK_SECONDS = 5.0
# httpx's timeout is per read: a server trickling a byte every 2 s never trips it, so the whole check
# has this deadline too (decision 412).
TOTAL_SECONDS = 3 * CHECK_SECONDS
ANSWER_BYTES = 4 << 20  # of an answer read: OpenRouter's whole model list is ~1 MB
_CUT = "klaw.cut"  # in a response's extensions: its body was longer than ANSWER_BYTES

OLLAMA_EXAMPLE = f"""To use a local Ollama model:
  1. install Ollama and run:  ollama pull llama3.2
  2. in engine.yaml:
       models:
         ollama/llama3.2:
           baseUrl: http://localhost:11434/v1
           contextBudget: 8192
       routing:
         default: ollama/llama3.2
For a hosted model, add it under models: with baseUrl and apiKeyEnv (e.g. OPENAI_API_KEY), export that
variable, and point routing.default at it (or set KLAW__ROUTING__DEFAULT=<model id>).
Only trying klaw? `{shlex.quote(sys.executable)} -m klaw.llm.fake_server` runs a stand-in model that
echoes you, and says what to set."""


@dataclass(frozen=True)
class ModelCheck:
    """What the check found. `refusal`: no chat can use this model, what is wrong and how to fix it (`klaw
    chat` stops on it, a service warns and goes on); `doubt`: an answer that may mean a wrong baseUrl, or
    nothing wrong (a 404 page from a server without a /models route), said and gone on from."""

    refusal: str | None = None
    doubt: str | None = None


async def model_check(
    model: ModelConfig,
    model_id: str,
    *,
    set_where: str,
    env: Mapping[str, str] | None = None,
    chosen: bool = False,
) -> ModelCheck:
    """Whether the model's server answers (see `ModelCheck`). `model` is `models.<model_id>` of
    engine.yaml; `chosen`: the chat picked it with /model (rather than following routing.default), which
    the answer says, with the way to pick another; `set_where` says where routing.default was set ("in
    /home/…/engine.yaml", "by KLAW__ROUTING__DEFAULT")."""
    env = os.environ if env is None else env
    endpoint = model_endpoint(model, model_id)
    where = (
        f"(this chat's model, chosen with /model {model_id}; to choose another, run klaw chat --skip-check"
        " and type /model <id>)"
        if chosen
        else f"(routing.default = {model_id} {set_where})"
    )
    if (missing := key_problem(model, model_id, env)) is not None:
        return ModelCheck(f"{missing}\n{where}")
    server = mask_url_credentials(model.base_url)
    if (fix := chat_path_in_base_url(model.base_url)) is not None:
        return ModelCheck(f"models.{model_id}.baseUrl is {server} {where}: {fix}.")
    headers = auth_headers(endpoint, env)
    doubt = None
    try:
        # The client model calls use: klaw's proxy rules (decisions 318, 335), not httpx's own reading of
        # the environment, which sent a model on this machine to HTTP_PROXY and refused `socks://`.
        async with asyncio.timeout(TOTAL_SECONDS), new_http_client(model.base_url) as client:
            response = await _get(client, endpoint.url("models"), headers)
            if response.status_code == 404 and await _answers_under_v1(client, endpoint, headers):
                return ModelCheck(
                    f"{server} has no /models (HTTP 404), but {server.rstrip('/')}/v1 answers {where}:"
                    f" add /v1 to baseUrl (models.{model_id}.baseUrl: {server.rstrip('/')}/v1)."
                )
            if response.status_code == 404 and not _is_json(response):
                doubt = await _not_found(client, endpoint, headers, where)
    except (httpx.HTTPError, TimeoutError) as exc:
        why = (
            f"it sent no complete answer within {TOTAL_SECONDS:g} s"
            if isinstance(exc, TimeoutError)
            else what_happened(exc, seconds=CHECK_SECONDS)
        )
        if isinstance(exc, httpx.HTTPError) and (scheme := await wrong_scheme(model.base_url, exc)):
            return _scheme_refusal(model.base_url, model_id, where, f"{scheme} ({why})")
        proxy = proxy_for(model.base_url)
        if proxy is None and (start := stand_in_start(model.base_url, model_id)) is not None:
            return ModelCheck(f"No model server answered at {server} {where}: {why}.\n{start}")
        fix = f"Start the server, or change models.{model_id}.baseUrl." if proxy is None else proxy.hint()
        return ModelCheck(f"No model server answered at {server} {where}: {why}.\n{fix}\n\n{OLLAMA_EXAMPLE}")
    if tls_port_answer(response.status_code, response.content):  # nginx's, Go's answer on a TLS port
        return _scheme_refusal(model.base_url, model_id, where, f"{TLS_WORDS} ({TLS_ANSWERED})")
    # Any other answer, a 404 among them, is a server: some proxies have no /models route.
    if response.status_code in (401, 403):
        key = model.api_key_env or "the API key variable"
        return ModelCheck(f"{server} refused the API key (HTTP {response.status_code}) {where}: check {key}.")
    if response.is_success and not _is_json(response):
        return ModelCheck(_not_a_model_server(response, server, model_id, where))
    return ModelCheck(doubt=doubt)


STAND_IN_PORT = 8999  # stand_in.py's default port, not imported: the preflight loads without the stand-in
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def stand_in_start(base_url: str, model_id: str) -> str | None:
    """How to start the stand-in model when the model configured is it (the id its banner tells a person to
    set, `stand-in/…`, or its port on this machine), else None: a person trying klaw with the stand-in down
    was given 12 lines of Ollama and hosted-model setup, the stand-in's command last (newcomer20)."""
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL:
        return None
    port = url.port or 80
    if url.host not in LOOPBACK or not (model_id.startswith("stand-in/") or port == STAND_IN_PORT):
        return None
    argument = "" if port == STAND_IN_PORT else f" {port}"
    return (
        f"Start the stand-in model in another terminal: {shlex.quote(sys.executable)} -m klaw.llm.fake_server{argument}"
    )


def _scheme_refusal(base_url: str, model_id: str, where: str, why: str) -> ModelCheck:
    """The refusal of a base URL whose port speaks the other scheme (`wrong_scheme.py`): the URL to set,
    not the Ollama steps of a server that is not there."""
    url = httpx.URL(base_url)
    other = with_scheme(base_url, "https" if url.scheme == "http" else "http")
    return ModelCheck(
        f"No model server answered at {mask_url_credentials(base_url)} {where}: {why}.\n"
        f"Set models.{model_id}.baseUrl: {other}"
    )


async def _get(client: httpx.AsyncClient, url: str, headers: Mapping[str, str]) -> httpx.Response:
    """The answer to a GET of `url` with at most `ANSWER_BYTES` of its body (unpacked, bounded): a server
    streaming /models without end, or a gzip bomb, held the whole body in memory (2.6 GB in 16 s, and
    `klaw serve` kept it: adversary20). A body cut there is judged by its content type alone (`_is_json`)."""
    async with client.stream("GET", url, headers=dict(headers), timeout=CHECK_SECONDS) as streamed:
        body = await excerpt(streamed, ANSWER_BYTES + 1)
    kept = [(name, value) for name, value in streamed.headers.multi_items() if name.lower() != "content-encoding"]
    cut = {_CUT: True} if len(body) > ANSWER_BYTES else {}
    return httpx.Response(streamed.status_code, headers=kept, content=body[:ANSWER_BYTES], extensions=cut)


def _is_json(response: httpx.Response) -> bool:
    if response.extensions.get(_CUT):  # a long answer: by what it says it is
        return "json" in response.headers.get("content-type", "")
    try:
        response.json()
    except ValueError:  # JSONDecodeError, UnicodeDecodeError
        return False
    return True


def _not_a_model_server(response: httpx.Response, server: str, model_id: str, where: str) -> str:
    """A 2xx answer to /models that is not JSON: a captive portal's sign-in page, another program's web page
    on that port. Named by its content type alone (never its body), with what to fix."""
    kind = response.headers.get("content-type", "").split(";")[0].strip()[:40] or "no content type"
    return (
        f"No model server answered at {server} {where}: GET /models answered HTTP {response.status_code}"
        f" with {kind}, not JSON (a network's sign-in page, or another program on that port).\n"
        f"Check models.{model_id}.baseUrl (host, port and the /v1 path), or sign in to the network first."
    )


async def _answers_under_v1(client: httpx.AsyncClient, endpoint: Endpoint, headers: Mapping[str, str]) -> bool:
    """Whether a base URL without /v1, whose /models was a 404, is a server that serves the API under
    /v1 (Ollama, vLLM, llama.cpp, LM Studio): its first message would be a 404 too. A server that has no
    /models at all answers 404 here as well, and is left to its first message (with `_not_found`'s doubt)."""
    if endpoint.base_url.rstrip("/").endswith("/v1"):
        return False
    answer = await _get(client, endpoint.url("v1/models"), headers)
    return answer.is_success


async def _not_found(
    client: httpx.AsyncClient, endpoint: Endpoint, headers: Mapping[str, str], where: str
) -> str | None:
    """The doubt a 404 page (not JSON) at `{baseUrl}/models` raises when baseUrl does not end in /v1 (`/v2`
    on a server whose API is at `/v1`): the first message would be a 404 too, unless the server has no
    /models route, as some proxies have none. So it names the URL that answered 404 and the usual /v1 path
    (saying when that path answers on the same server), and refuses nothing (decision 416)."""
    base = endpoint.base_url.partition("?")[0].rstrip("/")
    if base.endswith("/v1"):
        return None
    usual = str(httpx.URL(base).copy_with(path="/v1", query=None, fragment=None))
    answers = usual != f"{base}/v1" and await _answers(client, f"{usual}/models", headers)
    shown, usual = mask_url_credentials(base), mask_url_credentials(usual)
    return (
        f"GET {shown}/models answered HTTP 404, not JSON {where}: most model servers serve their API under /v1"
        + (f", and {usual}/models answers" if answers else "")
        + f". If the first message fails with HTTP 404 too, set models.{endpoint.model_id}.baseUrl: {usual}"
        " (a server without a /models route, as some proxies are, answers so too: then nothing needs changing)."
    )


async def _answers(client: httpx.AsyncClient, url: str, headers: Mapping[str, str]) -> bool:
    answer = await _get(client, url, headers)
    return answer.is_success and _is_json(answer)
