-- A lease's generation, raised each time a lease is taken: a turn's appends check that the lease still
-- holds the generation it was taken with, so an engine that stalled past its lease and woke after
-- another engine took the chat writes nothing more to it (docs/decisions/200-lease-fencing.md).
CREATE SEQUENCE chat_lease_generations;
ALTER TABLE chat_leases ADD COLUMN generation bigint NOT NULL DEFAULT nextval('chat_lease_generations');
-- Owned by the column, so `klaw reindex` moving the table between schemas moves the sequence with it.
ALTER SEQUENCE chat_lease_generations OWNED BY chat_leases.generation;
