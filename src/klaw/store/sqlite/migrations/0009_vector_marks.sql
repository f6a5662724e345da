-- klaw.db schema, version 9: a change counter per chat for its message vectors.
--
-- The in-memory int8 copy of a large chat's vectors is saved beside klaw.db (klaw.db.vectors/) so a
-- start loads it in a second instead of scanning vec_messages (36 s for 1M vectors). The copy names
-- the version it holds; every insert into vec_messages for the chat and every forget in it adds 1 in
-- the same transaction, so a copy that does not name the current version is stale and is rebuilt
-- from vec_messages (the source of truth). A chat without a row is at version 0.
-- Why: docs/decisions/145-int8-vector-search.md.

CREATE TABLE vector_marks (
    chat_key INTEGER PRIMARY KEY,
    version INTEGER NOT NULL
);
