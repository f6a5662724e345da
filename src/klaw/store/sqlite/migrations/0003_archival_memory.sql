-- klaw.db schema, version 3: archival memory, and deletes that leave no text behind.
--
-- A memory the agent saves (memory_save) is a `memory_saved` record in the conversation log; its
-- messages row keeps no text (the text is here) and shares its rowid with the chunk, so forgetting
-- the record's id removes both. The chunk's vector lives in `vec_memory`, created at run time by
-- SqliteMemoryChunks.bind_embedder (its dimension is the embedder's), bound through index_meta.

CREATE TABLE memory_chunks (
    rowid INTEGER PRIMARY KEY REFERENCES messages (rowid), -- = the memory_saved record's messages.rowid
    chat INTEGER NOT NULL REFERENCES chats (id),
    segment_id INTEGER NOT NULL REFERENCES segments (id),  -- where it was saved (forgetting the segment removes it)
    content TEXT NOT NULL,
    created_at INTEGER NOT NULL                            -- unix milliseconds, UTC
);
CREATE INDEX memory_chunks_by_chat ON memory_chunks (chat, created_at);

-- External-content FTS5 index over memory_chunks.content, kept in step by triggers (as messages_fts).
CREATE VIRTUAL TABLE memory_chunks_fts USING fts5 (
    content,
    content = 'memory_chunks',
    content_rowid = 'rowid',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER memory_chunks_fts_insert AFTER INSERT ON memory_chunks BEGIN
    INSERT INTO memory_chunks_fts (rowid, content) VALUES (new.rowid, new.content);
END;
CREATE TRIGGER memory_chunks_fts_delete AFTER DELETE ON memory_chunks BEGIN
    INSERT INTO memory_chunks_fts (memory_chunks_fts, rowid, content) VALUES ('delete', old.rowid, old.content);
END;
CREATE TRIGGER memory_chunks_fts_update AFTER UPDATE OF content ON memory_chunks BEGIN
    INSERT INTO memory_chunks_fts (memory_chunks_fts, rowid, content) VALUES ('delete', old.rowid, old.content);
    INSERT INTO memory_chunks_fts (rowid, content) VALUES (new.rowid, new.content);
END;

-- `/forget` must leave no token of the forgotten text in a full-text index: without secure-delete,
-- FTS5 only marks a deleted row and keeps its tokens until segments happen to merge.
INSERT INTO messages_fts (messages_fts, rank) VALUES ('secure-delete', 1);
INSERT INTO memory_chunks_fts (memory_chunks_fts, rank) VALUES ('secure-delete', 1);
