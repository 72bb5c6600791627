-- Segments for log compaction (storage/cloud/cleaner.py). A compacted partition's
-- batches are grouped in segments that roll as partitionlets do, by segment.bytes
-- and segment.ms (the caller passes both per batch, -1 for a topic that is not
-- compacted): kc_segments holds each segment's base offset, when it was rolled and
-- how far the cleaner has deduplicated it; kc_partitions the active segment's
-- size and roll time. A segment ends where the next begins; the last is active
-- and never cleaned. `cleanings` counts the cleaner's swaps of the partition's
-- index rows: a swap applies only if none came between its reading and its commit.
CREATE TABLE IF NOT EXISTS kc_segments (
    pid bigint NOT NULL REFERENCES kc_partitions(id) ON DELETE CASCADE,
    base_offset bigint NOT NULL,
    created_ms bigint NOT NULL,
    clean_to bigint,
    cleaned_ms bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (pid, base_offset)
);
ALTER TABLE kc_partitions ADD COLUMN IF NOT EXISTS seg_base bigint;
ALTER TABLE kc_partitions ADD COLUMN IF NOT EXISTS seg_size bigint NOT NULL DEFAULT 0;
ALTER TABLE kc_partitions ADD COLUMN IF NOT EXISTS seg_created bigint NOT NULL DEFAULT 0;
ALTER TABLE kc_partitions ADD COLUMN IF NOT EXISTS cleanings bigint NOT NULL DEFAULT 0;
