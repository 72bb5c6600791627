-- Fencing by leader epoch (version 2, brokers of one cluster): each batch may carry the
-- epoch under which its broker leads the partition, as kc_partition_leaders
-- (kafkacompat/cluster) recorded it. The leader row is read FOR SHARE after
-- the partition rows are locked, so a move of leadership either commits
-- first (and this batch is refused: base -2, epoch = the row's epoch) or
-- waits until this commit is done (and the new leader, which reads the
-- partition's offsets after the move, sees the batch). A fenced batch is
-- stamped with its leader epoch, so batch epochs and Metadata epochs are one
-- number. -1 means unfenced (a broker alone, or a cluster in another database).
--
-- Appends at a stated offset (a replica keeping its source's offsets): p_at[i] >= 0
-- stores the batch only if the partition's next offset is exactly that (base -3
-- and hw = the next offset otherwise), so a replica never gets a gap or an overlap.
-- hw is the partition's next offset after the batch.
--
-- Appends that are not a produce request's (kafkacompat/cluster): a transaction
-- marker is written by the transaction coordinator, which need not lead the
-- partition. p_guard[i] >= 0 names the partition whose leader row p_fence[i] is
-- checked against instead of the batch's own (the coordinator's __consumer_offsets
-- partition, as Kafka's partition leaders refuse markers of a deposed coordinator).
-- A fenced batch is stamped with its own partition's leader epoch as the leader
-- table holds it, read under the same lock, never with the store's open counter:
-- batch epochs and Metadata epochs stay one number whoever writes the batch.
--
-- Transactional batches (version 7): p_since[i] >= 0 stores the batch only if no
-- transaction marker of its producer (the producer id in its header, p_heads[i])
-- is in the partition at or after that offset (base -4 and hw = the next offset
-- otherwise). The coordinator's broker writes markers into partitions other
-- brokers lead; a batch admitted to a transaction that then ended (it waited
-- through an outage, its producer timed out and aborted) would otherwise be
-- stored after the abort marker and join the producer's next transaction, as
-- Kafka's partition leader refuses it by the verification guard (KIP-890).
CREATE OR REPLACE FUNCTION kc_now_ms() RETURNS bigint LANGUAGE sql AS
$$ SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;

-- Is there a marker of p_head's producer in partition p_pid at or after p_since?
-- (attributes are bytes 21-22 of a batch, the control bit in the second; the producer
-- id bytes 43-50; a control batch's row keeps it whole, a data batch's its header)
CREATE OR REPLACE FUNCTION kc_txn_ended(p_pid bigint, p_since bigint, p_head bytea) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT p_since >= 0 AND p_head IS NOT NULL AND EXISTS (
        SELECT 1 FROM kc_batches b WHERE b.pid = p_pid AND b.base_offset >= p_since AND b.head IS NOT NULL
            AND get_byte(b.head, 22) & 32 <> 0 AND substring(b.head FROM 44 FOR 8) = substring(p_head FROM 44 FOR 8))
$$;

-- Record one uploaded object and give its batches offsets, in one transaction.
-- Returns one row per batch, in the order given: its base offset and leader
-- epoch, or -1 when the partition no longer exists (topic deleted meanwhile).
-- With p_notify false the caller announces the partitions itself, after the
-- commit (kc_notify_partitions): a NOTIFY in the commit's transaction holds
-- PostgreSQL's database-wide notify lock through the commit's WAL flush, so
-- every broker's commits would queue behind one another.
CREATE OR REPLACE FUNCTION kc_commit(
    p_origin text, p_key text, p_size bigint, p_epoch int,
    p_pids bigint[], p_counts int[], p_pos bigint[], p_lens int[], p_maxts bigint[], p_fence int[],
    p_seg_bytes bigint[], p_seg_ms bigint[], p_at bigint[], p_guard bigint[], p_heads bytea[], p_since bigint[],
    p_notify boolean
) RETURNS TABLE (object_id bigint, base bigint, epoch int, hw bigint) LANGUAGE plpgsql AS $$
DECLARE
    obj bigint;
    i int;
    nxt bigint;
    old_epoch int;
    ep int;
    lead int;
    own int;
    fenced boolean := EXISTS (SELECT 1 FROM unnest(p_fence) f WHERE f >= 0);
    sb bigint;
    ss bigint;
    sc bigint;
    touched bigint[] := '{}';
BEGIN
    SELECT o.id INTO obj FROM kc_objects o WHERE o.key = p_key;
    IF FOUND THEN  -- a retried commit: answer what the first one assigned
        FOR i IN 1 .. coalesce(array_length(p_pids, 1), 0) LOOP
            SELECT b.base_offset, b.epoch INTO nxt, ep FROM kc_batches b
                WHERE b.object_id = obj AND b.position = p_pos[i];
            SELECT p.next_offset INTO hw FROM kc_partitions p WHERE p.id = p_pids[i];
            IF nxt IS NULL AND hw IS NOT NULL THEN
                nxt := CASE WHEN p_at[i] >= 0 THEN -3  -- refused the first time: offset, transaction or fence
                            WHEN kc_txn_ended(p_pids[i], p_since[i], p_heads[i]) THEN -4 ELSE -2 END;
            END IF;
            object_id := obj; base := coalesce(nxt, -1); epoch := coalesce(ep, -1); hw := coalesce(hw, -1);
            RETURN NEXT;
        END LOOP;
        RETURN;
    END IF;
    INSERT INTO kc_objects (key, size, created_ms) VALUES (p_key, p_size, kc_now_ms()) RETURNING id INTO obj;
    PERFORM 1 FROM kc_partitions p WHERE p.id = ANY (p_pids) ORDER BY p.id FOR UPDATE;
    IF fenced THEN  -- the batches' and the guards' leader rows, in one order, as moves lock them
        PERFORM 1 FROM kc_partition_leaders l JOIN kc_topics t ON t.stream = l.stream AND t.name = l.topic
            JOIN kc_partitions p ON p.topic_id = t.id AND p.idx = l.partition
            WHERE p.id = ANY (p_pids) OR p.id = ANY (p_guard) ORDER BY l.stream, l.topic, l.partition FOR SHARE OF l;
    END IF;
    FOR i IN 1 .. coalesce(array_length(p_pids, 1), 0) LOOP
        SELECT p.next_offset, p.leader_epoch, p.seg_base, p.seg_size, p.seg_created
            INTO nxt, old_epoch, sb, ss, sc FROM kc_partitions p WHERE p.id = p_pids[i];
        IF NOT FOUND THEN
            object_id := obj; base := -1; epoch := -1; hw := -1;
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF p_at[i] >= 0 AND p_at[i] <> nxt THEN
            object_id := obj; base := -3; epoch := -1; hw := nxt;
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF p_fence[i] >= 0 THEN
            SELECT l.epoch INTO own FROM kc_partition_leaders l JOIN kc_topics t
                ON t.stream = l.stream AND t.name = l.topic JOIN kc_partitions p ON p.topic_id = t.id
                AND p.idx = l.partition WHERE p.id = p_pids[i];
            lead := own;
            IF p_guard[i] >= 0 THEN  -- fenced by another partition's leader (a coordinator's)
                SELECT l.epoch INTO lead FROM kc_partition_leaders l JOIN kc_topics t
                    ON t.stream = l.stream AND t.name = l.topic JOIN kc_partitions p ON p.topic_id = t.id
                    AND p.idx = l.partition WHERE p.id = p_guard[i];
            END IF;
            IF lead IS DISTINCT FROM p_fence[i] THEN
                object_id := obj; base := -2; epoch := coalesce(lead, -1); hw := nxt;
                RETURN NEXT;
                CONTINUE;
            END IF;
            ep := greatest(old_epoch, coalesce(own, p_fence[i]));
        ELSE
            ep := greatest(old_epoch, p_epoch);
        END IF;
        IF p_since[i] >= 0 AND kc_txn_ended(p_pids[i], p_since[i], p_heads[i]) THEN  -- transactional only
            object_id := obj; base := -4; epoch := -1; hw := nxt;
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF ep > old_epoch THEN
            INSERT INTO kc_epochs VALUES (p_pids[i], ep, nxt) ON CONFLICT DO NOTHING;
        END IF;
        IF p_seg_bytes[i] > 0 THEN  -- a compacted topic: the batch joins the active segment or starts one
            IF sb IS NULL OR (ss > 0 AND (ss + p_lens[i] > p_seg_bytes[i] OR kc_now_ms() - sc >= p_seg_ms[i])) THEN
                sb := nxt; ss := 0; sc := kc_now_ms();
                INSERT INTO kc_segments (pid, base_offset, created_ms) VALUES (p_pids[i], nxt, sc)
                    ON CONFLICT DO NOTHING;
            END IF;
            UPDATE kc_partitions p SET next_offset = nxt + p_counts[i], leader_epoch = ep, seg_base = sb,
                seg_size = ss + p_lens[i], seg_created = sc WHERE p.id = p_pids[i];
        ELSE
            UPDATE kc_partitions p SET next_offset = nxt + p_counts[i], leader_epoch = ep WHERE p.id = p_pids[i];
        END IF;
        INSERT INTO kc_batches (pid, base_offset, last_offset, object_id, position, length, max_ts, epoch, head)
            VALUES (p_pids[i], nxt, nxt + p_counts[i] - 1, obj, p_pos[i], p_lens[i], p_maxts[i], ep, p_heads[i]);
        touched := touched || p_pids[i];
        object_id := obj; base := nxt; epoch := ep; hw := nxt + p_counts[i];
        RETURN NEXT;
    END LOOP;
    IF p_notify THEN
        PERFORM kc_notify_partitions(p_origin, touched, false);
    END IF;
END $$;

-- The signature of schema version 6 (no transactional batch refused).
CREATE OR REPLACE FUNCTION kc_commit(
    p_origin text, p_key text, p_size bigint, p_epoch int,
    p_pids bigint[], p_counts int[], p_pos bigint[], p_lens int[], p_maxts bigint[], p_fence int[],
    p_seg_bytes bigint[], p_seg_ms bigint[], p_at bigint[], p_guard bigint[], p_heads bytea[], p_notify boolean
) RETURNS TABLE (object_id bigint, base bigint, epoch int, hw bigint) LANGUAGE sql AS $$
    SELECT * FROM kc_commit(p_origin, p_key, p_size, p_epoch, p_pids, p_counts, p_pos, p_lens, p_maxts, p_fence,
                            p_seg_bytes, p_seg_ms, p_at, p_guard, p_heads,
                            array_fill(-1::bigint, ARRAY[coalesce(array_length(p_pids, 1), 0)]), p_notify)
$$;

-- The signature of schema version 5 (announced in the commit's transaction).
CREATE OR REPLACE FUNCTION kc_commit(
    p_origin text, p_key text, p_size bigint, p_epoch int,
    p_pids bigint[], p_counts int[], p_pos bigint[], p_lens int[], p_maxts bigint[], p_fence int[],
    p_seg_bytes bigint[], p_seg_ms bigint[], p_at bigint[], p_guard bigint[], p_heads bytea[]
) RETURNS TABLE (object_id bigint, base bigint, epoch int, hw bigint) LANGUAGE sql AS $$
    SELECT * FROM kc_commit(p_origin, p_key, p_size, p_epoch, p_pids, p_counts, p_pos, p_lens, p_maxts, p_fence,
                            p_seg_bytes, p_seg_ms, p_at, p_guard, p_heads, true)
$$;

-- The signature of schema version 4 (no batch headers in the index).
CREATE OR REPLACE FUNCTION kc_commit(
    p_origin text, p_key text, p_size bigint, p_epoch int,
    p_pids bigint[], p_counts int[], p_pos bigint[], p_lens int[], p_maxts bigint[], p_fence int[],
    p_seg_bytes bigint[], p_seg_ms bigint[], p_at bigint[], p_guard bigint[]
) RETURNS TABLE (object_id bigint, base bigint, epoch int, hw bigint) LANGUAGE sql AS $$
    SELECT * FROM kc_commit(p_origin, p_key, p_size, p_epoch, p_pids, p_counts, p_pos, p_lens, p_maxts, p_fence,
                            p_seg_bytes, p_seg_ms, p_at, p_guard,
                            array_fill(NULL::bytea, ARRAY[coalesce(array_length(p_pids, 1), 0)]))
$$;

-- The signature of schema version 3 (every batch fenced by its own partition's leader).
CREATE OR REPLACE FUNCTION kc_commit(
    p_origin text, p_key text, p_size bigint, p_epoch int,
    p_pids bigint[], p_counts int[], p_pos bigint[], p_lens int[], p_maxts bigint[], p_fence int[],
    p_seg_bytes bigint[], p_seg_ms bigint[], p_at bigint[]
) RETURNS TABLE (object_id bigint, base bigint, epoch int, hw bigint) LANGUAGE sql AS $$
    SELECT * FROM kc_commit(p_origin, p_key, p_size, p_epoch, p_pids, p_counts, p_pos, p_lens, p_maxts, p_fence,
                            p_seg_bytes, p_seg_ms, p_at,
                            array_fill(-1::bigint, ARRAY[coalesce(array_length(p_pids, 1), 0)]))
$$;

-- The signature of schema version 2 (no segments, no stated offsets), for brokers not yet upgraded.
CREATE OR REPLACE FUNCTION kc_commit(
    p_origin text, p_key text, p_size bigint, p_epoch int,
    p_pids bigint[], p_counts int[], p_pos bigint[], p_lens int[], p_maxts bigint[], p_fence int[]
) RETURNS TABLE (object_id bigint, base bigint, epoch int) LANGUAGE sql AS $$
    SELECT c.object_id, c.base, c.epoch FROM kc_commit(
        p_origin, p_key, p_size, p_epoch, p_pids, p_counts, p_pos, p_lens, p_maxts, p_fence,
        array_fill(-1::bigint, ARRAY[coalesce(array_length(p_pids, 1), 0)]),
        array_fill(-1::bigint, ARRAY[coalesce(array_length(p_pids, 1), 0)]),
        array_fill(-1::bigint, ARRAY[coalesce(array_length(p_pids, 1), 0)])) c
$$;

-- The unfenced signature of schema version 1, for brokers not yet upgraded.
CREATE OR REPLACE FUNCTION kc_commit(
    p_origin text, p_key text, p_size bigint, p_epoch int,
    p_pids bigint[], p_counts int[], p_pos bigint[], p_lens int[], p_maxts bigint[]
) RETURNS TABLE (object_id bigint, base bigint, epoch int) LANGUAGE sql AS $$
    SELECT * FROM kc_commit(p_origin, p_key, p_size, p_epoch, p_pids, p_counts, p_pos, p_lens, p_maxts,
                            array_fill(-1, ARRAY[coalesce(array_length(p_pids, 1), 0)]))
$$;

-- Tell every broker that partitions moved; a payload too long for NOTIFY
-- becomes '*' (reload every open partition).
CREATE OR REPLACE FUNCTION kc_notify_data(p_origin text, p_payload text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF p_payload IS NULL THEN
        RETURN;
    END IF;
    IF length(p_payload) > 7000 THEN
        p_payload := '*';
    END IF;
    PERFORM pg_notify('kc_data', p_origin || ' ' || p_payload);
END $$;

-- Announce partitions' offsets. Alone in its transaction (p_alone) it commits
-- without waiting for the WAL flush: the notify lock is held only a moment, and
-- a lost announcement is only a late one (brokers re-read on reconnect, and a
-- new leader reads its partitions).
CREATE OR REPLACE FUNCTION kc_notify_partitions(p_origin text, p_pids bigint[], p_alone boolean)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    payload text;
BEGIN
    IF p_alone THEN
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
    SELECT string_agg(p.id || ':' || p.next_offset || ':' || p.log_start || ':' || p.leader_epoch, ',')
        INTO payload FROM kc_partitions p WHERE p.id = ANY (p_pids);
    PERFORM kc_notify_data(p_origin, payload);
END $$;

-- Move a partition's log start up to p_start (never down, never past its end)
-- and drop the batches wholly below it. Returns the log start, or NULL when
-- p_start is past the end (nothing changes).
CREATE OR REPLACE FUNCTION kc_advance_start(p_origin text, p_pid bigint, p_start bigint)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    nxt bigint;
    cur bigint;
    ep int;
BEGIN
    SELECT p.next_offset, p.log_start, p.leader_epoch INTO nxt, cur, ep FROM kc_partitions p
        WHERE p.id = p_pid FOR UPDATE;
    IF NOT FOUND OR p_start > nxt THEN
        RETURN NULL;
    END IF;
    IF p_start > cur THEN
        UPDATE kc_partitions SET log_start = p_start WHERE id = p_pid;
        DELETE FROM kc_batches WHERE pid = p_pid AND last_offset < p_start;
        DELETE FROM kc_epochs e WHERE e.pid = p_pid AND e.start_offset < p_start
            AND EXISTS (SELECT 1 FROM kc_epochs l WHERE l.pid = p_pid AND l.epoch > e.epoch AND l.start_offset <= p_start);
        cur := p_start;
        PERFORM kc_notify_data(p_origin, p_pid || ':' || nxt || ':' || cur || ':' || ep);
    END IF;
    RETURN cur;
END $$;
