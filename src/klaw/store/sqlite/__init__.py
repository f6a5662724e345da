"""SQLite implementation of the storage protocol (apsw + FTS5 + sqlite-vec)."""
