-- The version of the last change that took vectors away from a chat (a delete, an update in place, a
-- truncate), beside `version` (migration 0008). An engine whose copy of the chat is behind reads only
-- the vectors it lacks when nothing was taken away since its copy was read; otherwise every vector
-- again: rowids alone cannot tell a vector deleted and inserted again under the same rowid
-- (docs/decisions/221-postgres-int8-vector-copy.md).
ALTER TABLE vector_marks ADD COLUMN deleted bigint NOT NULL DEFAULT 0;

CREATE FUNCTION klaw_vectors_taken() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO vector_marks AS k (chat, version, previous, deleted)
    SELECT DISTINCT c.chat, pg_current_xact_id()::text::bigint, 0, pg_current_xact_id()::text::bigint
    FROM changed_vectors c
    ON CONFLICT (chat) DO UPDATE SET previous = k.version, version = excluded.version, deleted = excluded.deleted;
    RETURN NULL;
END $$;

DROP TRIGGER message_vectors_deleted ON message_vectors;
DROP TRIGGER message_vectors_updated ON message_vectors;
CREATE TRIGGER message_vectors_deleted AFTER DELETE ON message_vectors REFERENCING OLD TABLE AS changed_vectors
    FOR EACH STATEMENT EXECUTE FUNCTION klaw_vectors_taken();
CREATE TRIGGER message_vectors_updated AFTER UPDATE ON message_vectors REFERENCING NEW TABLE AS changed_vectors
    FOR EACH STATEMENT EXECUTE FUNCTION klaw_vectors_taken();

-- A truncate keeps every chat's mark and moves it, so a chat filled again later is never caught up from.
CREATE OR REPLACE FUNCTION klaw_vectors_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE vector_marks SET previous = version, version = pg_current_xact_id()::text::bigint,
        deleted = pg_current_xact_id()::text::bigint;
    RETURN NULL;
END $$;
