-- klaw.db schema, version 1. Vector tables (vec_messages …) are created at run time by
-- SqliteVectors.bind_embedder, because their dimension is the configured embedder's.

CREATE TABLE chats (
    id INTEGER PRIMARY KEY,              -- the integer key vec0 partitions by
    channel TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    UNIQUE (channel, chat_id)
);

CREATE TABLE segments (
    id INTEGER PRIMARY KEY,
    chat INTEGER NOT NULL REFERENCES chats (id),
    started_at INTEGER NOT NULL,         -- unix milliseconds, UTC
    ended_at INTEGER                     -- NULL while open
);
CREATE INDEX segments_by_chat ON segments (chat, id);

CREATE TABLE messages (
    rowid INTEGER PRIMARY KEY,           -- explicit alias: stable across VACUUM, links FTS and vectors
    id TEXT NOT NULL UNIQUE,
    channel TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    chat INTEGER NOT NULL REFERENCES chats (id),
    segment_id INTEGER NOT NULL REFERENCES segments (id),
    role TEXT NOT NULL,
    type TEXT NOT NULL,
    content TEXT NOT NULL,
    metadata TEXT,                       -- JSON object or NULL
    created_at INTEGER NOT NULL          -- unix milliseconds, UTC
);
CREATE INDEX messages_by_segment ON messages (segment_id, rowid);
CREATE INDEX messages_by_chat_time ON messages (chat, created_at);

-- External-content FTS5 index over messages.content, kept in step by triggers.
CREATE VIRTUAL TABLE messages_fts USING fts5 (
    content,
    content = 'messages',
    content_rowid = 'rowid',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts (rowid, content) VALUES (new.rowid, new.content);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.rowid, old.content);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.rowid, old.content);
    INSERT INTO messages_fts (rowid, content) VALUES (new.rowid, new.content);
END;

CREATE TABLE exchanges (
    id INTEGER PRIMARY KEY,
    chat INTEGER NOT NULL REFERENCES chats (id),
    segment_id INTEGER NOT NULL REFERENCES segments (id),
    started_at INTEGER NOT NULL,
    ended_at INTEGER,
    status TEXT NOT NULL DEFAULT 'open', -- open | completed | failed | tool_limit
    user_message_rowid INTEGER REFERENCES messages (rowid),
    final_message_rowid INTEGER REFERENCES messages (rowid)
);
CREATE INDEX exchanges_by_segment ON exchanges (segment_id, id);

CREATE TABLE sessions (
    chat INTEGER PRIMARY KEY REFERENCES chats (id),
    model TEXT NOT NULL,
    segment_id INTEGER NOT NULL REFERENCES segments (id),
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE TABLE settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,                 -- JSON
    updated_at INTEGER NOT NULL
);

-- Durable embedding queue: a row per thing to embed, retried with backoff, never silently dropped.
CREATE TABLE embedding_jobs (
    id INTEGER PRIMARY KEY,
    target TEXT NOT NULL,                -- e.g. 'message'
    target_rowid INTEGER NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending', -- pending | failed
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    last_error TEXT,                     -- an error class and short reason, never content
    created_at INTEGER NOT NULL,
    UNIQUE (target, target_rowid)
);
CREATE INDEX embedding_jobs_due ON embedding_jobs (status, next_attempt_at);

-- Which embedder filled each vector table; vectors of different embedders are never mixed.
CREATE TABLE index_meta (
    table_name TEXT PRIMARY KEY,
    embedder_id TEXT NOT NULL,
    dim INTEGER NOT NULL,
    created_at INTEGER NOT NULL
);
