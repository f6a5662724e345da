"""The SQLite side of the summaries repository: `summaries`, `vec_summaries`, the fold of summary records."""
