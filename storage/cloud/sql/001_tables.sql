-- Schema version 1: the engine's tables (every name prefixed kc_, to share a database).
CREATE TABLE IF NOT EXISTS kc_meta (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    schema_version int NOT NULL,
    store_id uuid NOT NULL,
    epoch int NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS kc_settings (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE IF NOT EXISTS kc_streams (
    path text PRIMARY KEY,
    policy jsonb NOT NULL,
    created_ms bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS kc_topics (
    id uuid PRIMARY KEY,
    stream text NOT NULL REFERENCES kc_streams(path) ON DELETE CASCADE,
    name text NOT NULL,
    partitions int NOT NULL,
    configs jsonb NOT NULL,
    created_ms bigint NOT NULL,
    UNIQUE (stream, name)
);
CREATE TABLE IF NOT EXISTS kc_partitions (
    id bigserial PRIMARY KEY,
    topic_id uuid NOT NULL REFERENCES kc_topics(id) ON DELETE CASCADE,
    idx int NOT NULL,
    next_offset bigint NOT NULL DEFAULT 0,
    log_start bigint NOT NULL DEFAULT 0,
    leader_epoch int NOT NULL DEFAULT 0,
    UNIQUE (topic_id, idx)
);
CREATE TABLE IF NOT EXISTS kc_epochs (
    pid bigint NOT NULL REFERENCES kc_partitions(id) ON DELETE CASCADE,
    epoch int NOT NULL,
    start_offset bigint NOT NULL,
    PRIMARY KEY (pid, epoch)
);
CREATE TABLE IF NOT EXISTS kc_objects (
    id bigserial PRIMARY KEY,
    key text NOT NULL UNIQUE,
    size bigint NOT NULL,
    created_ms bigint NOT NULL,
    unreferenced_ms bigint
);
CREATE TABLE IF NOT EXISTS kc_batches (
    pid bigint NOT NULL REFERENCES kc_partitions(id) ON DELETE CASCADE,
    base_offset bigint NOT NULL,
    last_offset bigint NOT NULL,
    object_id bigint NOT NULL REFERENCES kc_objects(id),
    position bigint NOT NULL,
    length int NOT NULL,
    max_ts bigint NOT NULL,
    epoch int NOT NULL,
    PRIMARY KEY (pid, base_offset)
);
CREATE INDEX IF NOT EXISTS kc_batches_object ON kc_batches (object_id);
CREATE TABLE IF NOT EXISTS kc_cursors (
    stream text NOT NULL REFERENCES kc_streams(path) ON DELETE CASCADE,
    grp text NOT NULL,
    topic text NOT NULL,
    part int NOT NULL,
    "offset" bigint NOT NULL,
    leader_epoch int NOT NULL,
    metadata text NOT NULL,
    commit_ms bigint NOT NULL,
    PRIMARY KEY (stream, grp, topic, part)
);
CREATE TABLE IF NOT EXISTS kc_state (
    stream text NOT NULL REFERENCES kc_streams(path) ON DELETE CASCADE,
    tbl text NOT NULL,
    key text NOT NULL,
    value jsonb NOT NULL,
    PRIMARY KEY (stream, tbl, key)
);
