-- klaw.db schema, version 7: exchange ids are stable and never reused.
--
-- A person reads an exchange's id (`klaw memory list`, the inspector) and types it back
-- (`/forget exchange 12`). Ids used to be whatever `INTEGER PRIMARY KEY` gave on insert, so a
-- reindex after a forget renumbered every later exchange, and forgetting the newest one handed its
-- number to the next. Now the engine reserves an id from this high-water mark before it logs the
-- exchange_open record, the record carries it, and the fold inserts it as given; the fold raises
-- the mark for every id it inserts and for the mark a `forget` tombstone remembers, so a database
-- rebuilt from the log (where forgotten exchanges left no record) never hands out a used id again.
-- Why: docs/decisions/100-stable-exchange-ids.md.

CREATE TABLE id_marks (
    name TEXT PRIMARY KEY,             -- what is numbered ('exchange')
    high INTEGER NOT NULL              -- the highest id ever given out or reserved
);

INSERT INTO id_marks (name, high) VALUES ('exchange', COALESCE((SELECT max(id) FROM exchanges), 0));
