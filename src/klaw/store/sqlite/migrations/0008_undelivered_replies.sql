-- klaw.db schema, version 8: replies not yet confirmed delivered, sent again when the engine starts.
--
-- A turn's reply is logged and its exchange closed before it is delivered; an engine killed in
-- between (or a gateway that never got the frame) lost the reply for good. The exchange_close fold
-- now notes the final reply here in the same transaction; a gateway's `delivered` frame (sent once
-- its channel has shown the reply) or an in-process channel's return removes the row; the engine
-- sends what is left again at start, under the reply's record id, which gateways deduplicate.
-- Rows go with their message (forget) by the foreign key. Starts empty: replies written before
-- this version are not sent again. Why: docs/decisions/101-reply-redelivery.md.

CREATE TABLE undelivered_replies (
    message_rowid INTEGER PRIMARY KEY REFERENCES messages (rowid) ON DELETE CASCADE,
    exchange_id INTEGER NOT NULL
);
