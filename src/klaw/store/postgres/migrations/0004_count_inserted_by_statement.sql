-- A segment's conversation_messages is raised once per INSERT statement, not once per row: a row
-- trigger updated the same segments row once for every message of a many-row INSERT, and each
-- update of one row within a transaction walks the versions the earlier ones left, so an INSERT
-- of n messages cost O(n^2) (a 5,000-message batch ran at ~300 rows/s). The count is unchanged.
DROP TRIGGER messages_inserted ON messages;

CREATE OR REPLACE FUNCTION klaw_message_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE segments s SET conversation_messages = s.conversation_messages + n.added
    FROM (
        SELECT i.segment_id, count(*) AS added FROM inserted_messages i
        WHERE klaw_is_conversation(i.type, i.role) GROUP BY i.segment_id
    ) AS n
    WHERE s.id = n.segment_id;
    RETURN NULL;
END $$;

CREATE TRIGGER messages_inserted AFTER INSERT ON messages REFERENCING NEW TABLE AS inserted_messages
    FOR EACH STATEMENT EXECUTE FUNCTION klaw_message_inserted();
