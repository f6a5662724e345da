-- klaw.db schema, version 15: the places `message_send` took in each target chat's last hour, so
-- `tools.messageSendsPerChatPerHour` survives a restart (docs/decisions/418-durable-send-counts.md).
-- The target is its "channel:chat_id" text: no chat row is made for a send that is refused. Rows
-- older than an hour are deleted by each reservation.
CREATE TABLE sends (
    id INTEGER PRIMARY KEY,
    target TEXT NOT NULL,
    sent_at INTEGER NOT NULL -- epoch milliseconds, the engine's clock
);
CREATE INDEX sends_by_target ON sends (target, sent_at);
