-- A version per chat of its message vectors, changed by every statement that inserts or deletes any of
-- them (the engine's inserts, a forget's cascade, another engine's or a CLI process's writes), so an
-- engine keeping the chat's int8 copy in memory can tell, in the round trip of each search, whether the
-- copy is still the chat's vectors (docs/decisions/221-postgres-int8-vector-copy.md). The version is
-- the writing transaction's id (64-bit, never reused, unique across schemas, so a table rebuilt by
-- `klaw reindex` never repeats a version a copy was taken at); `previous` is the version it replaced,
-- so an engine that inserted can tell that nobody else changed the chat since its copy's version.
CREATE TABLE vector_marks (
    chat bigint PRIMARY KEY,
    version bigint NOT NULL,
    previous bigint NOT NULL
);

CREATE FUNCTION klaw_vectors_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO vector_marks AS k (chat, version, previous)
    SELECT DISTINCT c.chat, pg_current_xact_id()::text::bigint, 0 FROM changed_vectors c
    ON CONFLICT (chat) DO UPDATE SET previous = k.version, version = excluded.version;
    RETURN NULL;
END $$;

-- TRUNCATE (a move into the database started over) deletes without row triggers: every mark goes, so
-- every copy taken before it is stale.
CREATE FUNCTION klaw_vectors_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM vector_marks;
    RETURN NULL;
END $$;

CREATE TRIGGER message_vectors_inserted AFTER INSERT ON message_vectors REFERENCING NEW TABLE AS changed_vectors
    FOR EACH STATEMENT EXECUTE FUNCTION klaw_vectors_changed();
CREATE TRIGGER message_vectors_deleted AFTER DELETE ON message_vectors REFERENCING OLD TABLE AS changed_vectors
    FOR EACH STATEMENT EXECUTE FUNCTION klaw_vectors_changed();
CREATE TRIGGER message_vectors_updated AFTER UPDATE ON message_vectors REFERENCING NEW TABLE AS changed_vectors
    FOR EACH STATEMENT EXECUTE FUNCTION klaw_vectors_changed();
CREATE TRIGGER message_vectors_truncated AFTER TRUNCATE ON message_vectors
    FOR EACH STATEMENT EXECUTE FUNCTION klaw_vectors_truncated();

-- The chats that hold vectors already: marked, so that a chat without a mark is one without vectors.
INSERT INTO vector_marks (chat, version, previous)
SELECT DISTINCT chat, pg_current_xact_id()::text::bigint, 0 FROM message_vectors;
