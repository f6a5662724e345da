-- klaw.db schema, version 14: "a segment's last conversation message" is said once.
--
-- Migration 13 spelled that subquery out in `messages_fts_last_source` and four times in the two
-- triggers that move a segment's last message between `messages_fts_last` and `messages_fts` when
-- the segment ends or opens again. One view now names it, so the three places cannot drift apart.
-- What each table indexes, and when, is unchanged (docs/decisions/218-append-only-full-text.md);
-- no row of either index is touched by this migration.

-- Every segment, whether it is still open, and its last conversation message (NULL when it has none).
CREATE VIEW segment_last_message AS
SELECT
    s.id AS segment_id,
    s.ended_at IS NULL AS open,
    (
        SELECT m.rowid FROM messages m
        WHERE m.segment_id = s.id AND m.type = 'text' AND m.role IN ('user', 'assistant')
        ORDER BY m.rowid DESC LIMIT 1
    ) AS rowid
FROM segments s;

DROP VIEW messages_fts_last_source;
CREATE VIEW messages_fts_last_source AS
SELECT t.rowid AS rowid, t.content AS content, t.context AS context, t.following AS following
FROM segment_last_message l CROSS JOIN messages_text_around t
WHERE l.open AND t.rowid = l.rowid;

DROP TRIGGER messages_fts_segment_ended;
CREATE TRIGGER messages_fts_segment_ended AFTER UPDATE OF ended_at ON segments
WHEN old.ended_at IS NULL AND new.ended_at IS NOT NULL BEGIN
    INSERT INTO messages_fts_last (messages_fts_last, rowid, content, context, following)
    SELECT 'delete', rowid, content, context, following FROM messages_text_around
    WHERE rowid = (SELECT rowid FROM segment_last_message WHERE segment_id = new.id);
    INSERT INTO messages_fts (rowid, content, context, following)
    SELECT rowid, content, context, following FROM messages_fts_source
    WHERE rowid = (SELECT rowid FROM segment_last_message WHERE segment_id = new.id);
END;

DROP TRIGGER messages_fts_segment_reopened;
CREATE TRIGGER messages_fts_segment_reopened AFTER UPDATE OF ended_at ON segments
WHEN old.ended_at IS NOT NULL AND new.ended_at IS NULL BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content, context, following)
    SELECT 'delete', rowid, content, context, following FROM messages_text_around
    WHERE rowid = (SELECT rowid FROM segment_last_message WHERE segment_id = new.id);
    INSERT INTO messages_fts_last (rowid, content, context, following)
    SELECT rowid, content, context, following FROM messages_fts_last_source
    WHERE rowid = (SELECT rowid FROM segment_last_message WHERE segment_id = new.id);
END;
