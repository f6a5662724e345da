-- klaw.db schema, version 6: each segment counts its conversation messages (user or assistant text).
--
-- The auto-RAG word gate needs, every turn, how many conversation messages the segment holds (a
-- rare word is held by at most a share of them; store/sqlite/search.py word_counts). Counting them
-- reads every row of the segment, ~70 ms at 100k messages on a Raspberry-class core; kept here by
-- triggers it is one row read. Triggers rather than code: every insert, delete and re-filing
-- (live ingestion, `/forget`, `klaw reindex`) goes through them, so the count cannot drift. The
-- condition is `record_kinds.conversation_sql` (type 'text', role user or assistant), spelt out
-- because a migration is fixed text; a test compares the count with a fresh one.
-- Why: docs/decisions/095-turn-cost-at-scale.md.

ALTER TABLE segments ADD COLUMN conversation_messages INTEGER NOT NULL DEFAULT 0;

UPDATE segments SET conversation_messages = (
    SELECT count(*) FROM messages m
    WHERE m.segment_id = segments.id AND m.type = 'text' AND m.role IN ('user', 'assistant')
);

CREATE TRIGGER segments_count_insert AFTER INSERT ON messages
WHEN new.type = 'text' AND new.role IN ('user', 'assistant') BEGIN
    UPDATE segments SET conversation_messages = conversation_messages + 1 WHERE id = new.segment_id;
END;

CREATE TRIGGER segments_count_delete AFTER DELETE ON messages
WHEN old.type = 'text' AND old.role IN ('user', 'assistant') BEGIN
    UPDATE segments SET conversation_messages = conversation_messages - 1 WHERE id = old.segment_id;
END;

CREATE TRIGGER segments_count_update AFTER UPDATE OF segment_id, type, role ON messages BEGIN
    UPDATE segments SET conversation_messages = conversation_messages - 1
    WHERE id = old.segment_id AND old.type = 'text' AND old.role IN ('user', 'assistant');
    UPDATE segments SET conversation_messages = conversation_messages + 1
    WHERE id = new.segment_id AND new.type = 'text' AND new.role IN ('user', 'assistant');
END;
