"""How summaries are stored: their values, their log records, their repository protocol and its SQLite side.

One package, so a change to how summaries are stored touches one place (docs/decisions/001-feature-packages.md);
the summarizers that write them (LLM-driven workers) are `klaw/memory/summaries/`.
"""
