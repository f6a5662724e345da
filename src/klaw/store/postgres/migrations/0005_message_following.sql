-- A message's full-text entry also holds the message after it (SQLite migration 0011's
-- `messages_fts.following`; why: docs/decisions/194-next-message-in-full-text.md).
--
-- `following`: the text of the next conversation message (user or assistant text) of the same
-- segment, for a conversation message. The append writes it on the previous conversation message
-- when the next one lands (store/postgres/messages.py); a delete or an edit of a message rewrites it
-- on the message before, as `context` is rewritten on the message after, so a forgotten message
-- leaves no word in its neighbours' entries. `search` weighs it C, as `context` (0.2 in ts_rank_cd's
-- default weights). Existing rows are filled here and the tsvector and its GIN index built again.

ALTER TABLE messages DROP COLUMN search;  -- and its index messages_search
ALTER TABLE messages ADD COLUMN following text;
UPDATE messages m SET following = (
    SELECT n.content FROM messages n
    WHERE n.segment_id = m.segment_id AND n.rowid > m.rowid AND klaw_is_conversation(n.type, n.role)
    ORDER BY n.rowid LIMIT 1
)
WHERE klaw_is_conversation(m.type, m.role);
ALTER TABLE messages ADD COLUMN search tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('english'::regconfig, content), 'A')
    || setweight(to_tsvector('english'::regconfig, coalesce(context, '')), 'C')
    || setweight(to_tsvector('english'::regconfig, coalesce(following, '')), 'C')
) STORED;
CREATE INDEX messages_search ON messages USING gin (search);

-- A deleted conversation message: its segment counts one less, the next conversation message of the
-- segment now follows the one before it (its context is rewritten) and the one before is now
-- followed by the next (its following is rewritten).
CREATE OR REPLACE FUNCTION klaw_message_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF klaw_is_conversation(OLD.type, OLD.role) THEN
        UPDATE segments SET conversation_messages = conversation_messages - 1 WHERE id = OLD.segment_id;
        UPDATE messages n SET context = (
            SELECT p.content FROM messages p
            WHERE p.segment_id = n.segment_id AND p.rowid < n.rowid AND klaw_is_conversation(p.type, p.role)
            ORDER BY p.rowid DESC LIMIT 1
        )
        WHERE n.rowid = (
            SELECT s.rowid FROM messages s
            WHERE s.segment_id = OLD.segment_id AND s.rowid > OLD.rowid AND klaw_is_conversation(s.type, s.role)
            ORDER BY s.rowid LIMIT 1
        );
        UPDATE messages p SET following = (
            SELECT n.content FROM messages n
            WHERE n.segment_id = p.segment_id AND n.rowid > p.rowid AND klaw_is_conversation(n.type, n.role)
            ORDER BY n.rowid LIMIT 1
        )
        WHERE p.rowid = (
            SELECT s.rowid FROM messages s
            WHERE s.segment_id = OLD.segment_id AND s.rowid < OLD.rowid AND klaw_is_conversation(s.type, s.role)
            ORDER BY s.rowid DESC LIMIT 1
        );
    END IF;
    RETURN NULL;
END $$;

-- A message whose text changes: the conversation messages before and after it in its segment, whose
-- following and context it is, follow.
CREATE OR REPLACE FUNCTION klaw_message_edited() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF klaw_is_conversation(NEW.type, NEW.role) THEN
        UPDATE messages n SET context = NEW.content
        WHERE n.rowid = (
            SELECT s.rowid FROM messages s
            WHERE s.segment_id = NEW.segment_id AND s.rowid > NEW.rowid AND klaw_is_conversation(s.type, s.role)
            ORDER BY s.rowid LIMIT 1
        );
        UPDATE messages p SET following = NEW.content
        WHERE p.rowid = (
            SELECT s.rowid FROM messages s
            WHERE s.segment_id = NEW.segment_id AND s.rowid < NEW.rowid AND klaw_is_conversation(s.type, s.role)
            ORDER BY s.rowid DESC LIMIT 1
        );
    END IF;
    RETURN NULL;
END $$;
