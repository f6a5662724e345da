-- A message's length in words, for bm25's length normalisation (store/postgres/bm25.py): the runs of
-- letters and digits of its own text, the previous and the next conversation message's (every
-- column of its `search` entry), as FTS5 counts a row's tokens for SQLite's bm25. Stored, so a search
-- reads it instead of counting the words of every message it matches (~10x a search's time at 50k).
ALTER TABLE messages ADD COLUMN search_tokens integer GENERATED ALWAYS AS (
    regexp_count(content, '[[:alnum:]]+')
    + regexp_count(coalesce(context, ''), '[[:alnum:]]+')
    + regexp_count(coalesce(following, ''), '[[:alnum:]]+')
) STORED;
