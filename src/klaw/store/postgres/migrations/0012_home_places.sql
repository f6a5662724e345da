-- Which home each engine runs for, and where each home was last started from (docs/decisions/539-what-newcomer24-hit-a-moved-home.md).
-- A home's identity is the random id in its `home-id` file, which `klaw backup` packs and `klaw restore` keeps:
-- a restored copy is the same home in another place. An engine whose home id a live engine of another place
-- holds is refused (two copies of one home would answer its chats and run its scheduled tasks twice); one
-- starting from another place than the home's last is warned, and becomes its place. Engines of different
-- homes share a database as before.
ALTER TABLE engine_leases ADD COLUMN home_id text;
ALTER TABLE engine_leases ADD COLUMN place text;

CREATE TABLE home_places (
    home_id text PRIMARY KEY,
    place text NOT NULL,                 -- host:folder of the home's last start
    started_at timestamptz NOT NULL
);
