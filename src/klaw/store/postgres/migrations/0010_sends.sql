-- The places `message_send` took in each target chat's last hour, so `tools.messageSendsPerChatPerHour`
-- holds across restarts and across the engines sharing this database
-- (docs/decisions/418-durable-send-counts.md). As klaw.db's migration 15.
CREATE TABLE sends (
    id bigserial PRIMARY KEY,
    target text NOT NULL,
    sent_at bigint NOT NULL -- epoch milliseconds, the engine's clock
);
CREATE INDEX sends_by_target ON sends (target, sent_at);
