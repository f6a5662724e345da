-- klaw.db schema, version 10: an exchange and its records found without reading the whole chat.
--
-- Every turn the exchange summarizer reads a finished exchange's records (store/sqlite/history.py)
-- and the close and summary records are folded to their exchange (exchange_fold.py, summaries fold).
-- A person's messages of an exchange are "the chat's user text after the previous exchange's user
-- message", and the only indexes were a chat's messages by time and its exchanges by id, so each of
-- these lookups read every message or every exchange of the chat: ~50 ms at 100k messages, on the
-- one database thread that every accept and exchange record of every chat waits for.
--
-- Each index is partial on a condition the queries it serves name (a person's text; a user message
-- rowid; a start time, which every exchange has): a query can use it only when it names the same
-- condition, so the plan of no other query changes, with or without the planner's statistics.
-- Why: docs/decisions/190-turn-bookkeeping-at-scale.md.

-- A chat's user messages by rowid (an index's entries end with the rowid).
CREATE INDEX messages_user_by_chat ON messages (chat) WHERE role = 'user' AND type = 'text';

-- The exchange before another (by user message), and the exchange a user message belongs to.
CREATE INDEX exchanges_by_user_message ON exchanges (chat, user_message_rowid) WHERE user_message_rowid IS NOT NULL;

-- The exchange an exchange_open record opened (chat and start time), for its close and its summaries.
CREATE INDEX exchanges_by_start ON exchanges (chat, started_at) WHERE started_at IS NOT NULL;
