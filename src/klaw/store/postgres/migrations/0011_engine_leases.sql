-- `engine_leases`: each engine running on this database and the embedder (model id, dimension) it
-- embeds with, until `expires_at` (the server's clock), renewed with its chat leases and deleted at its
-- close. An engine whose embedder differs from a live one's refuses to start, even over empty vector
-- tables: it would re-bind `index_meta` under the engine still running (docs/decisions/532-what-adversary32-found-b.md).
CREATE TABLE engine_leases (
    holder text PRIMARY KEY,
    embedder_id text NOT NULL,
    dim integer NOT NULL,
    expires_at timestamptz NOT NULL
);
