"""The storage protocol on PostgreSQL with pgvector (`database.backend: postgres`)."""
