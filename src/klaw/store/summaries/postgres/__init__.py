"""The summary repository on PostgreSQL (the same rules as `store/summaries/sqlite/`)."""
