"""Storage: the async storage protocol, its SQLite implementation and the schema migrations."""
