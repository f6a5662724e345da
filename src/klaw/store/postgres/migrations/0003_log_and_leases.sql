-- The conversation log in the database, and which engine serves each chat
-- (docs/decisions/132-log-with-several-engines.md, docs/decisions/170-chat-leases.md).
--
-- `log_records`: every record appended, as the JSONL line the file log writes (store/log_format.py),
-- inserted by the append in the same transaction as its fold, so no fold exists without its record.
-- Append-only but for `/forget`, whose tombstone's fold deletes the rows it names. `seq` is the order
-- of appends: `klaw reindex` and `klaw log export` read it back in that order.
CREATE TABLE log_records (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id text NOT NULL UNIQUE,
    chat bigint NOT NULL REFERENCES chats (id),
    created_at bigint NOT NULL,
    line text NOT NULL
);
CREATE INDEX log_records_by_chat ON log_records (chat, seq);

-- `chat_leases`: the engine serving a chat's turns until `expires_at` (the server's clock, so engines
-- on machines whose clocks differ agree); renewed while the engine lives, released when the chat is idle.
CREATE TABLE chat_leases (
    chat bigint PRIMARY KEY REFERENCES chats (id),
    holder text NOT NULL,
    expires_at timestamptz NOT NULL
);

-- Recent user messages, for finding chats left unanswered by an engine that died.
CREATE INDEX messages_by_time ON messages (created_at);
