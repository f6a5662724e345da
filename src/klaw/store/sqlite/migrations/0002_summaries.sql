-- klaw.db schema, version 2: summaries of exchanges and segments (cross-conversation memory).
--
-- An exchange summary (kind 'exchange') is 1–2 sentences about one turn. A segment summary (kind
-- 'segment', one row per segment) is rolled forward as exchange summaries arrive and becomes final
-- once the segment is closed and every exchange in it is folded in. Exchange summaries and final
-- segment summaries are embedded through `embedding_jobs` (target 'summary', target_rowid = id);
-- their vectors live in `vec_summaries`, created at run time by the summary repository's
-- bind_embedder (the dimension is the embedder's) together with the triggers that drop a vector
-- when its summary's text changes or the summary is deleted.

CREATE TABLE summaries (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,                  -- exchange | segment
    chat INTEGER NOT NULL REFERENCES chats (id),
    segment_id INTEGER NOT NULL REFERENCES segments (id) ON DELETE CASCADE,
    exchange_id INTEGER REFERENCES exchanges (id) ON DELETE CASCADE, -- set for kind 'exchange'
    text TEXT NOT NULL,
    model TEXT NOT NULL,                 -- the model that wrote it
    final INTEGER NOT NULL DEFAULT 0,    -- 1: covers its exchange / its closed segment entirely
    covers_exchange_id INTEGER,          -- the newest exchange folded in (for an exchange: itself)
    exchanges_covered INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,         -- unix milliseconds, UTC
    updated_at INTEGER NOT NULL,
    CHECK (kind IN ('exchange', 'segment')),
    CHECK ((kind = 'exchange') = (exchange_id IS NOT NULL))
);
CREATE UNIQUE INDEX summaries_one_per_exchange ON summaries (exchange_id) WHERE exchange_id IS NOT NULL;
CREATE UNIQUE INDEX summaries_one_per_segment ON summaries (segment_id) WHERE kind = 'segment';
CREATE INDEX summaries_by_segment ON summaries (segment_id, kind, exchange_id);
CREATE INDEX summaries_by_chat ON summaries (chat, kind, final);

-- An exchange's neighbours in its chat bound its messages (store/sqlite/exchange_messages.py).
CREATE INDEX exchanges_by_chat ON exchanges (chat, id);
