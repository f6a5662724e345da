-- klaw.db schema, version 5: summaries are folded from the log's exchange_summary / segment_summary
-- records (store/summaries/log_records.py), so `klaw reindex` rebuilds them without a model call.
--
-- `summaries.record_rowid`: the messages row of the log record the summary was last written from
-- (its `record_id` for the summarizers' sources). NULL: written before this version (exported to
-- the log once at engine start, memory/summaries/summary_export.py) or by a benchmark.
-- `summary_records`: which exchange or segment each summary record is about, so `/forget` can name
-- every summary record (every rolling version included) that could retell what it erases.

ALTER TABLE summaries ADD COLUMN record_rowid INTEGER;

CREATE TABLE summary_records (
    rowid INTEGER PRIMARY KEY,           -- messages.rowid of an exchange_summary / segment_summary record
    segment_id INTEGER NOT NULL,         -- the segment summarized (for an exchange summary: its exchange's)
    exchange_id INTEGER                  -- the exchange an exchange summary is of; NULL for a segment summary
);
CREATE INDEX summary_records_by_segment ON summary_records (segment_id, exchange_id);
CREATE INDEX summary_records_by_exchange ON summary_records (exchange_id);
