-- Replies not yet confirmed delivered, sent again when the engine starts (SQLite migration 0008,
-- docs/decisions/101-reply-redelivery.md): noted by the exchange_close fold in the close's
-- transaction, removed when a channel confirms the reply; gone with their message (forget).
CREATE TABLE undelivered_replies (
    message_rowid bigint PRIMARY KEY REFERENCES messages (rowid) ON DELETE CASCADE,
    exchange_id bigint NOT NULL
);
