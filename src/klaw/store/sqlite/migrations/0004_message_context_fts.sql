-- klaw.db schema, version 4: a message's full-text entry also holds the message before it.
--
-- A reply rarely repeats the words of what it answers ("how did the interview go?" / "great, they
-- offered me the job"), so `messages_fts` gets a second column, `context`: the text of the previous
-- conversation message (user or assistant text; tool and control records skipped) of the same
-- segment. Search weighs it 0.2 against the message's own words (bm25 column weights, search.py);
-- on LoCoMo dev this took full text alone from R@5 53.2 to 62.5 and hybrid search from 64.0 to
-- 66.3 (docs/memory/how-memory-works.md).
--
-- The index stays external-content, now over the view `messages_fts_source`, so no text is stored
-- twice and `SELECT content, context FROM messages_fts` still reads what is indexed. An entry is
-- removed with FTS5's 'delete' command and the values it was indexed with, which the view gives
-- as long as each row still holds them: hence BEFORE triggers. Because a row's context is another
-- message's text, deleting or editing a conversation message re-indexes the next one, so forgetting
-- a message leaves no word of it in its successor's entry (secure-delete, set by migration 3 on the
-- old table, is set again on this one). Messages are only appended (rowids grow), so an insert
-- never changes an existing entry. Reindex and live ingestion append in the same order through the
-- same triggers, so they build the same index.

DROP TRIGGER messages_fts_insert;
DROP TRIGGER messages_fts_delete;
DROP TRIGGER messages_fts_update;
DROP TABLE messages_fts;

-- What messages_fts indexes for each message: its text and, for a conversation message, the text of
-- the previous conversation message of its segment (NULL for the first one and for other records).
CREATE VIEW messages_fts_source AS
SELECT
    m.rowid AS rowid,
    m.content AS content,
    CASE WHEN m.type = 'text' AND m.role IN ('user', 'assistant') THEN (
        SELECT p.content FROM messages p
        WHERE p.segment_id = m.segment_id AND p.rowid < m.rowid AND p.type = 'text' AND p.role IN ('user', 'assistant')
        ORDER BY p.rowid DESC LIMIT 1
    ) END AS context
FROM messages m;

-- The conversation message after each message in its segment: the one whose context it is.
CREATE VIEW messages_successor AS
SELECT
    m.rowid AS rowid,
    (
        SELECT n.rowid FROM messages n
        WHERE n.segment_id = m.segment_id AND n.rowid > m.rowid AND n.type = 'text' AND n.role IN ('user', 'assistant')
        ORDER BY n.rowid LIMIT 1
    ) AS successor
FROM messages m
WHERE m.type = 'text' AND m.role IN ('user', 'assistant');

CREATE VIRTUAL TABLE messages_fts USING fts5 (
    content,
    context,
    content = 'messages_fts_source',
    content_rowid = 'rowid',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
INSERT INTO messages_fts (messages_fts, rank) VALUES ('secure-delete', 1);
INSERT INTO messages_fts (messages_fts) VALUES ('rebuild');

CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts (rowid, content, context)
    SELECT rowid, content, context FROM messages_fts_source WHERE rowid = new.rowid;
END;

-- Before the row goes: its entry and its successor's, with the values they were indexed with.
CREATE TRIGGER messages_fts_delete BEFORE DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content, context)
    SELECT 'delete', rowid, content, context FROM messages_fts_source
    WHERE rowid IN (old.rowid, (SELECT successor FROM messages_successor WHERE rowid = old.rowid));
END;

-- After: the successor again, now following the message before the deleted one. (`old` is gone
-- from `messages`, so its successor is found by segment and rowid.)
CREATE TRIGGER messages_fts_delete_successor AFTER DELETE ON messages
WHEN old.type = 'text' AND old.role IN ('user', 'assistant') BEGIN
    INSERT INTO messages_fts (rowid, content, context)
    SELECT rowid, content, context FROM messages_fts_source WHERE rowid = (
        SELECT n.rowid FROM messages n
        WHERE n.segment_id = old.segment_id AND n.rowid > old.rowid AND n.type = 'text' AND n.role IN ('user', 'assistant')
        ORDER BY n.rowid LIMIT 1
    );
END;

CREATE TRIGGER messages_fts_before_update BEFORE UPDATE OF content ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content, context)
    SELECT 'delete', rowid, content, context FROM messages_fts_source
    WHERE rowid IN (old.rowid, (SELECT successor FROM messages_successor WHERE rowid = old.rowid));
END;

CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
    INSERT INTO messages_fts (rowid, content, context)
    SELECT rowid, content, context FROM messages_fts_source
    WHERE rowid IN (new.rowid, (SELECT successor FROM messages_successor WHERE rowid = new.rowid));
END;
