-- klaw.db schema, version 12: how many messages the table holds, and how many were ever deleted.
--
-- Full text asks of every searched word "how many messages hold it?", and remembers the answers
-- while the table only grows (store/sqlite/term_counts.py, decision 196). The bounds that make a
-- remembered answer exact need the table's size and whether a message was deleted since, as of the
-- snapshot the search reads. They were kept by TEMP triggers of the engine's connection, which only
-- that connection could read; full text now runs on read connections beside the writer (decision
-- 216), so the two numbers are kept here, in the writing transaction, and every snapshot holds its own.

CREATE TABLE message_counts (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    rows INTEGER NOT NULL,
    deletes INTEGER NOT NULL
);

INSERT INTO message_counts (id, rows, deletes) SELECT 1, count(*), 0 FROM messages;

CREATE TRIGGER message_counts_insert AFTER INSERT ON messages
BEGIN
    UPDATE message_counts SET rows = rows + 1 WHERE id = 1;
END;

CREATE TRIGGER message_counts_delete AFTER DELETE ON messages
BEGIN
    UPDATE message_counts SET rows = rows - 1, deletes = deletes + 1 WHERE id = 1;
END;
