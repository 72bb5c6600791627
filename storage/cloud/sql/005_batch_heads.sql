-- Batch headers in the index (kc_commit's p_heads): `head` is a data batch's 61-byte
-- header, a control batch whole (a marker, tens of bytes: its coordinator epoch and type
-- are in its record), NULL for a row written before version 5 or holding several batches.
ALTER TABLE kc_batches ADD COLUMN IF NOT EXISTS head bytea;
