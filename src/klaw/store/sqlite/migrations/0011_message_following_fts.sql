-- klaw.db schema, version 11: a message's full-text entry also holds the message after it.
--
-- Migration 4 gave each conversation message's entry the words of the message before it (`context`),
-- so a reply is found by the words of what it answers. The other way round is as common: a question
-- or a remark holds little of its topic's words and the next message names them ("how did it go?" /
-- "the bakery interview went great"), or the question's words sit in an answer while what was asked
-- is the message it answers. So `messages_fts` gets a third column, `following`: the text of the next
-- conversation message (user or assistant text; tool and control records skipped) of the same
-- segment, weighed in bm25 as `context` is (full_text.NEIGHBOUR_WEIGHT). On LoCoMo dev hybrid search
-- went from R@5 68.9 / R@10 77.5 / MRR 58.0 to 69.5 / 77.5 / 58.9
-- (docs/decisions/194-next-message-in-full-text.md).
--
-- The log stays the truth; only this index changes. A message's entry depends on its neighbours, so:
-- - an append re-indexes the previous conversation message of its segment (it now has a following
--   message). Rowids only grow, so the new message is the last of its segment and that entry was
--   indexed with no following text: it is deleted with the values it was indexed with (FTS5's
--   'delete' needs them) and inserted again with the new one;
-- - a delete or an edit re-indexes the message before and the message after (their `following` and
--   `context` were its text), so forgetting a message leaves no word of it in its neighbours' entries
--   (secure-delete is set again on the new table).
-- Reindex and live ingestion append in the same order through the same triggers, so they build the
-- same index. The whole index is rebuilt here from the messages already stored.

DROP TRIGGER messages_fts_insert;
DROP TRIGGER messages_fts_delete;
DROP TRIGGER messages_fts_delete_successor;
DROP TRIGGER messages_fts_before_update;
DROP TRIGGER messages_fts_update;
DROP TABLE messages_fts;
DROP VIEW messages_fts_source;
DROP VIEW messages_successor;

-- The conversation messages before and after each conversation message in its segment (NULL at an end).
CREATE VIEW messages_around AS
SELECT
    m.rowid AS rowid,
    (
        SELECT p.rowid FROM messages p
        WHERE p.segment_id = m.segment_id AND p.rowid < m.rowid AND p.type = 'text' AND p.role IN ('user', 'assistant')
        ORDER BY p.rowid DESC LIMIT 1
    ) AS predecessor,
    (
        SELECT n.rowid FROM messages n
        WHERE n.segment_id = m.segment_id AND n.rowid > m.rowid AND n.type = 'text' AND n.role IN ('user', 'assistant')
        ORDER BY n.rowid LIMIT 1
    ) AS successor
FROM messages m
WHERE m.type = 'text' AND m.role IN ('user', 'assistant');

-- What messages_fts indexes for each message: its text and, for a conversation message, the texts of
-- the conversation messages before and after it in its segment (NULL at an end and for other records).
CREATE VIEW messages_fts_source AS
SELECT
    m.rowid AS rowid,
    m.content AS content,
    CASE WHEN m.type = 'text' AND m.role IN ('user', 'assistant') THEN (
        SELECT p.content FROM messages p
        WHERE p.segment_id = m.segment_id AND p.rowid < m.rowid AND p.type = 'text' AND p.role IN ('user', 'assistant')
        ORDER BY p.rowid DESC LIMIT 1
    ) END AS context,
    CASE WHEN m.type = 'text' AND m.role IN ('user', 'assistant') THEN (
        SELECT n.content FROM messages n
        WHERE n.segment_id = m.segment_id AND n.rowid > m.rowid AND n.type = 'text' AND n.role IN ('user', 'assistant')
        ORDER BY n.rowid LIMIT 1
    ) END AS following
FROM messages m;

CREATE VIRTUAL TABLE messages_fts USING fts5 (
    content,
    context,
    following,
    content = 'messages_fts_source',
    content_rowid = 'rowid',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
INSERT INTO messages_fts (messages_fts, rank) VALUES ('secure-delete', 1);
INSERT INTO messages_fts (messages_fts) VALUES ('rebuild');

-- The new message, and the one before it, indexed until now without a following message.
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content, context, following)
    SELECT 'delete', rowid, content, context, NULL FROM messages_fts_source
    WHERE rowid = (SELECT predecessor FROM messages_around WHERE rowid = new.rowid);
    INSERT INTO messages_fts (rowid, content, context, following)
    SELECT rowid, content, context, following FROM messages_fts_source
    WHERE rowid IN (new.rowid, (SELECT predecessor FROM messages_around WHERE rowid = new.rowid));
END;

-- Before the row goes: its entry and its neighbours', with the values they were indexed with.
CREATE TRIGGER messages_fts_delete BEFORE DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content, context, following)
    SELECT 'delete', rowid, content, context, following FROM messages_fts_source
    WHERE rowid IN (
        old.rowid,
        (SELECT predecessor FROM messages_around WHERE rowid = old.rowid),
        (SELECT successor FROM messages_around WHERE rowid = old.rowid)
    );
END;

-- After: the neighbours again, now next to each other. (`old` is gone from `messages`, so they are
-- found by segment and rowid.)
CREATE TRIGGER messages_fts_delete_neighbours AFTER DELETE ON messages
WHEN old.type = 'text' AND old.role IN ('user', 'assistant') BEGIN
    INSERT INTO messages_fts (rowid, content, context, following)
    SELECT rowid, content, context, following FROM messages_fts_source WHERE rowid IN (
        (
            SELECT p.rowid FROM messages p
            WHERE p.segment_id = old.segment_id AND p.rowid < old.rowid AND p.type = 'text' AND p.role IN ('user', 'assistant')
            ORDER BY p.rowid DESC LIMIT 1
        ),
        (
            SELECT n.rowid FROM messages n
            WHERE n.segment_id = old.segment_id AND n.rowid > old.rowid AND n.type = 'text' AND n.role IN ('user', 'assistant')
            ORDER BY n.rowid LIMIT 1
        )
    );
END;

CREATE TRIGGER messages_fts_before_update BEFORE UPDATE OF content ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content, context, following)
    SELECT 'delete', rowid, content, context, following FROM messages_fts_source
    WHERE rowid IN (
        old.rowid,
        (SELECT predecessor FROM messages_around WHERE rowid = old.rowid),
        (SELECT successor FROM messages_around WHERE rowid = old.rowid)
    );
END;

CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
    INSERT INTO messages_fts (rowid, content, context, following)
    SELECT rowid, content, context, following FROM messages_fts_source
    WHERE rowid IN (
        new.rowid,
        (SELECT predecessor FROM messages_around WHERE rowid = new.rowid),
        (SELECT successor FROM messages_around WHERE rowid = new.rowid)
    );
END;
