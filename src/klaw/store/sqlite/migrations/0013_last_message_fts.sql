-- klaw.db schema, version 13: an append only inserts into the full-text index.
--
-- Since migration 11 a conversation message's entry holds the text of the message after it
-- (`following`), and an append re-indexed the previous message: an FTS5 'delete' of its entry and an
-- insert. With secure-delete on (forgetting must leave no word behind) that delete looked each of
-- the entry's words up in every segment of the index: ~1 ms of CPU an append, ~2/3 of its cost, and
-- most of `klaw reindex`'s time (docs/decisions/211-turn-appends-cost.md).
--
-- Now a message enters `messages_fts` only once its entry is final: when the next conversation
-- message of its segment arrives (with that message's text as `following`), or when its segment
-- ends (with none). Until then, the last conversation message of each open segment (at most one a
-- chat) is indexed in `messages_fts_last`, a small table of the same columns and tokenizer; search
-- scores its matches there with the statistics of `messages_fts`, by the formula of bm25()
-- (last_messages.py). Every message is in exactly one of the two tables, with the values the views
-- below give (docs/decisions/218-append-only-full-text.md).
--
-- So an append inserts into `messages_fts` and deletes only from the small table (the previous last
-- message of the segment). That delete is a plain one: FTS5's secure-delete costs ~1.6 ms however
-- small the table (measured), while without it the words stay in a segment of the table until a
-- merge, which in a table of a few rows comes within a few appends. Forgetting (or editing) a
-- message therefore rebuilds the small table from its few rows ('rebuild' deletes all of its old
-- pages, which `PRAGMA secure_delete` zeroes): no word of a forgotten message stays in either.
-- `messages_fts` keeps secure-delete; only a forget or an edit ever deletes from it now.
--
-- The tables stay external-content: `messages_fts_source` now gives the rows of `messages_fts` (every
-- message but those last ones) and `messages_fts_last_source` the others, so FTS5's 'rebuild' and
-- 'integrity-check' hold for each. `messages_fts` is not rebuilt: the last messages are taken out
-- of it (a few rows) and the new table is filled from them.

DROP TRIGGER messages_fts_insert;
DROP TRIGGER messages_fts_delete;
DROP TRIGGER messages_fts_delete_neighbours;
DROP TRIGGER messages_fts_before_update;
DROP TRIGGER messages_fts_update;
DROP VIEW messages_fts_source;

-- Every message's text and, for a conversation message, the texts of the conversation messages
-- before and after it in its segment (NULL at an end and for other records); `last` says whether it
-- is the last conversation message of a segment still open, whose `following` is still to come.
CREATE VIEW messages_text_around AS
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
    ) END AS following,
    (
        m.type = 'text' AND m.role IN ('user', 'assistant')
        AND EXISTS (SELECT 1 FROM segments s WHERE s.id = m.segment_id AND s.ended_at IS NULL)
        AND NOT EXISTS (
            SELECT 1 FROM messages n
            WHERE n.segment_id = m.segment_id AND n.rowid > m.rowid AND n.type = 'text' AND n.role IN ('user', 'assistant')
        )
    ) AS last
FROM messages m;

-- What each table indexes.
CREATE VIEW messages_fts_source AS
SELECT rowid, content, context, following FROM messages_text_around WHERE NOT last;
-- (From the open segments: FTS5's 'rebuild' of the small table reads a row per open segment.)
CREATE VIEW messages_fts_last_source AS
SELECT t.rowid AS rowid, t.content AS content, t.context AS context, t.following AS following
FROM segments s CROSS JOIN messages_text_around t
WHERE s.ended_at IS NULL AND t.rowid = (
    SELECT m.rowid FROM messages m WHERE m.segment_id = s.id AND m.type = 'text' AND m.role IN ('user', 'assistant')
    ORDER BY m.rowid DESC LIMIT 1
);

-- The last messages leave `messages_fts` (indexed there with no following text, as they have none).
INSERT INTO messages_fts (messages_fts, rowid, content, context, following)
SELECT 'delete', rowid, content, context, following FROM messages_fts_last_source;

CREATE VIRTUAL TABLE messages_fts_last USING fts5 (
    content,
    context,
    following,
    content = 'messages_fts_last_source',
    content_rowid = 'rowid',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
INSERT INTO messages_fts_last (messages_fts_last) VALUES ('rebuild');

-- A conversation message appended to an open segment (every append: `messages.py` appends to the
-- chat's open segment): the previous last message moves to `messages_fts` with the new one as its
-- following text, and the new one is the segment's last.
CREATE TRIGGER messages_fts_insert_last AFTER INSERT ON messages
WHEN new.type = 'text' AND new.role IN ('user', 'assistant')
AND EXISTS (SELECT 1 FROM segments s WHERE s.id = new.segment_id AND s.ended_at IS NULL) BEGIN
    INSERT INTO messages_fts_last (messages_fts_last, rowid, content, context, following)
    SELECT 'delete', rowid, content, context, NULL FROM messages_text_around
    WHERE rowid = (SELECT predecessor FROM messages_around WHERE rowid = new.rowid);
    INSERT INTO messages_fts (rowid, content, context, following)
    SELECT rowid, content, context, following FROM messages_text_around
    WHERE rowid = (SELECT predecessor FROM messages_around WHERE rowid = new.rowid);
    INSERT INTO messages_fts_last (rowid, content, context, following)
    SELECT rowid, content, context, following FROM messages_text_around WHERE rowid = new.rowid;
END;

-- Any other record (tool steps, control records) is final at once. So is a conversation message
-- appended to an ended segment (klaw never does), whose previous message is then re-indexed as
-- before migration 12.
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages
WHEN NOT (new.type = 'text' AND new.role IN ('user', 'assistant')
AND EXISTS (SELECT 1 FROM segments s WHERE s.id = new.segment_id AND s.ended_at IS NULL)) BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content, context, following)
    SELECT 'delete', rowid, content, context, NULL FROM messages_text_around
    WHERE rowid = (SELECT predecessor FROM messages_around WHERE rowid = new.rowid);
    INSERT INTO messages_fts (rowid, content, context, following)
    SELECT rowid, content, context, following FROM messages_text_around
    WHERE rowid IN (new.rowid, (SELECT predecessor FROM messages_around WHERE rowid = new.rowid));
END;

-- A segment that ends: its last message is final, with no following text.
CREATE TRIGGER messages_fts_segment_ended AFTER UPDATE OF ended_at ON segments
WHEN old.ended_at IS NULL AND new.ended_at IS NOT NULL BEGIN
    INSERT INTO messages_fts_last (messages_fts_last, rowid, content, context, following)
    SELECT 'delete', rowid, content, context, following FROM messages_text_around
    WHERE rowid = (
        SELECT m.rowid FROM messages m WHERE m.segment_id = new.id AND m.type = 'text' AND m.role IN ('user', 'assistant')
        ORDER BY m.rowid DESC LIMIT 1
    );
    INSERT INTO messages_fts (rowid, content, context, following)
    SELECT rowid, content, context, following FROM messages_fts_source
    WHERE rowid = (
        SELECT m.rowid FROM messages m WHERE m.segment_id = new.id AND m.type = 'text' AND m.role IN ('user', 'assistant')
        ORDER BY m.rowid DESC LIMIT 1
    );
END;

-- A segment opened again (klaw never does): its last message goes back to `messages_fts_last`.
CREATE TRIGGER messages_fts_segment_reopened AFTER UPDATE OF ended_at ON segments
WHEN old.ended_at IS NOT NULL AND new.ended_at IS NULL BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content, context, following)
    SELECT 'delete', rowid, content, context, following FROM messages_text_around
    WHERE rowid = (
        SELECT m.rowid FROM messages m WHERE m.segment_id = new.id AND m.type = 'text' AND m.role IN ('user', 'assistant')
        ORDER BY m.rowid DESC LIMIT 1
    );
    INSERT INTO messages_fts_last (rowid, content, context, following)
    SELECT rowid, content, context, following FROM messages_fts_last_source
    WHERE rowid = (
        SELECT m.rowid FROM messages m WHERE m.segment_id = new.id AND m.type = 'text' AND m.role IN ('user', 'assistant')
        ORDER BY m.rowid DESC LIMIT 1
    );
END;

-- Before a row goes: its entry and its neighbours' in `messages_fts`, with the values they were
-- indexed with (secure-delete: nothing of them stays in the file).
CREATE TRIGGER messages_fts_delete BEFORE DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content, context, following)
    SELECT 'delete', rowid, content, context, following FROM messages_fts_source
    WHERE rowid IN (
        old.rowid,
        (SELECT predecessor FROM messages_around WHERE rowid = old.rowid),
        (SELECT successor FROM messages_around WHERE rowid = old.rowid)
    );
END;

-- After: the neighbours again, now next to each other (`old` is gone from `messages`, so they are
-- found by segment and rowid), and the small table rebuilt: it is what it should now be, and no
-- segment of it keeps the words of an entry deleted before.
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
    INSERT INTO messages_fts_last (messages_fts_last) VALUES ('rebuild');
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
    INSERT INTO messages_fts_last (messages_fts_last) VALUES ('rebuild');
END;
