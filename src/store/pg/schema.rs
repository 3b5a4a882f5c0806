//! Versioned migrations of the PostgreSQL schema (`WF_PG_SCHEMA`). The table
//! `migrations` holds one row per migration applied; they are applied on
//! first use in one transaction under an advisory lock, so workers starting
//! together never apply one twice. Never edit a migration that has shipped:
//! append a new one.
//!
//! The tables mirror the SQLite ones (the same rows, the same meaning).
//! Times are RFC 3339 text in UTC with millisecond precision, as on SQLite;
//! the columns compared or sorted as text use the "C" collation, so that
//! text order is time order whatever the database's locale.

/// Every migration, in order. Index + 1 is the schema version it produces.
pub const MIGRATIONS: &[&str] = &[
    // 1: everything SQLite's migrations 1-7 built.
    r#"
    CREATE TABLE definitions (
        hash      TEXT PRIMARY KEY,         -- sha256 of source, hex
        source    TEXT NOT NULL,
        step_ids  TEXT NOT NULL,            -- JSON list of step ids in file order
        compiled  TEXT                      -- validated form, tagged with the wf version
    );

    CREATE TABLE instances (
        id               TEXT COLLATE "C" PRIMARY KEY,
        seq              BIGSERIAL,         -- creation order, for listings
        workflow         TEXT NOT NULL,
        status           TEXT NOT NULL,
        definition_hash  TEXT NOT NULL REFERENCES definitions(hash),
        workflow_path    TEXT NOT NULL,
        base_dir         TEXT NOT NULL,
        inputs           TEXT NOT NULL,     -- JSON object
        state            TEXT NOT NULL,     -- JSON object, committed state
        outputs          TEXT,              -- JSON object, set when the instance completes
        error            TEXT,
        wake_at          TEXT COLLATE "C",  -- sleeping: when the next timer is due
        waiting_event    TEXT,              -- waiting: the event names awaited
        cancel_requested BIGINT NOT NULL DEFAULT 0,
        lease_owner      TEXT,              -- host:pid:nonce of the holder
        lease_expires_ms BIGINT,            -- unix ms; a lease past this is dead
        lease_epoch      BIGINT NOT NULL DEFAULT 0, -- the fencing token
        created_at       TEXT COLLATE "C" NOT NULL,
        updated_at       TEXT NOT NULL
    );
    CREATE INDEX instances_by_created ON instances(created_at, seq);
    CREATE INDEX instances_by_status ON instances(status, wake_at);

    CREATE TABLE runs (
        instance_id     TEXT COLLATE "C" NOT NULL REFERENCES instances(id),
        number          BIGINT NOT NULL,
        outcome         TEXT,
        started_at      TEXT NOT NULL,
        finished_at     TEXT,
        trace_id        TEXT,
        span_id         TEXT,
        parent_span_id  TEXT,
        started_ns      BIGINT,
        PRIMARY KEY (instance_id, number)
    );

    CREATE TABLE steps (
        instance_id    TEXT COLLATE "C" NOT NULL REFERENCES instances(id),
        key            TEXT COLLATE "C" NOT NULL,
        step_id        TEXT NOT NULL,
        status         TEXT NOT NULL,
        attempts       BIGINT NOT NULL DEFAULT 0,
        budget_base    BIGINT NOT NULL DEFAULT 0,
        outcome        TEXT,
        error_type     TEXT,
        error_message  TEXT,
        output         TEXT,
        started_at     TEXT,
        finished_at    TEXT,
        retry_at       TEXT,
        seq            BIGINT,
        items          TEXT,
        PRIMARY KEY (instance_id, key)
    );

    CREATE TABLE attempts (
        instance_id    TEXT COLLATE "C" NOT NULL REFERENCES instances(id),
        step_key       TEXT COLLATE "C" NOT NULL,
        attempt        BIGINT NOT NULL,
        run            BIGINT NOT NULL,
        outcome        TEXT,
        error_type     TEXT,
        error_message  TEXT,
        exit_code      BIGINT,
        started_at     TEXT COLLATE "C" NOT NULL,
        finished_at    TEXT,
        stdout         BYTEA,
        stderr         BYTEA,
        span_id        TEXT,
        started_ns     BIGINT,
        proc_host      TEXT,
        proc_pgid      BIGINT,
        proc_start     BIGINT,
        PRIMARY KEY (instance_id, step_key, attempt)
    );

    CREATE TABLE events (
        id           BIGSERIAL PRIMARY KEY,
        instance_id  TEXT COLLATE "C" NOT NULL REFERENCES instances(id),
        name         TEXT NOT NULL,
        payload      TEXT NOT NULL,
        traceparent  TEXT,
        received_at  TEXT NOT NULL,
        consumed_by  TEXT
    );
    CREATE INDEX events_by_instance ON events(instance_id, name, consumed_by);

    CREATE TABLE spans (
        trace_id        TEXT NOT NULL,
        span_id         TEXT COLLATE "C" NOT NULL,
        parent_span_id  TEXT,
        instance_id     TEXT COLLATE "C" NOT NULL REFERENCES instances(id),
        run             BIGINT NOT NULL,
        name            TEXT NOT NULL,
        kind            TEXT NOT NULL DEFAULT 'internal',
        start_ns        BIGINT NOT NULL,
        end_ns          BIGINT NOT NULL,
        status          TEXT NOT NULL DEFAULT 'unset',
        status_message  TEXT,
        attributes      TEXT NOT NULL DEFAULT '{}',
        links           TEXT NOT NULL DEFAULT '[]',
        exported        BOOLEAN NOT NULL DEFAULT false
    );
    CREATE INDEX spans_by_instance ON spans(instance_id, run, start_ns);

    -- The fence: first in every transaction of a runner. It locks the
    -- instance's row until the transaction ends (a takeover waits for it),
    -- and aborts the transaction unless the runner's epoch is current,
    -- naming the holder in the message.
    CREATE FUNCTION check_fence(p_id TEXT, p_epoch BIGINT) RETURNS BIGINT
    LANGUAGE plpgsql AS $$
    DECLARE
        e BIGINT;
        h TEXT;
    BEGIN
        SELECT lease_epoch, lease_owner INTO e, h FROM instances WHERE id = p_id FOR UPDATE;
        IF e IS DISTINCT FROM p_epoch THEN
            RAISE EXCEPTION USING ERRCODE = 'WF001', MESSAGE = COALESCE(h, '');
        END IF;
        RETURN e;
    END $$;
    "#,
    // 2: schedules (`wf schedule add`), as SQLite's migration 8: an entry's
    // next fire time is taken by moving it on in the transaction that
    // creates the instance; `schedule_fires` says which fire time started
    // which instance and refuses a second one.
    r#"
    CREATE TABLE schedules (
        workflow         TEXT COLLATE "C" NOT NULL,
        idx              BIGINT NOT NULL,
        spec             TEXT NOT NULL,
        timezone         TEXT,
        overlap          TEXT NOT NULL,
        catchup_ms       BIGINT NOT NULL,
        inputs           TEXT NOT NULL,
        state            TEXT NOT NULL,
        definition_hash  TEXT NOT NULL REFERENCES definitions(hash),
        workflow_path    TEXT NOT NULL,
        base_dir         TEXT NOT NULL,
        next_fire_ms     BIGINT NOT NULL,
        buffered_ms      BIGINT,
        last_instance    TEXT,
        last_fire_ms     BIGINT,
        skipped          BIGINT NOT NULL DEFAULT 0,
        registered_at    TEXT NOT NULL,
        PRIMARY KEY (workflow, idx)
    );
    CREATE TABLE schedule_fires (
        workflow     TEXT COLLATE "C" NOT NULL,
        idx          BIGINT NOT NULL,
        fire_ms      BIGINT NOT NULL,
        instance_id  TEXT COLLATE "C" NOT NULL,
        spec         TEXT NOT NULL,
        timezone     TEXT,
        PRIMARY KEY (workflow, idx, fire_ms)
    );
    CREATE INDEX schedule_fires_by_instance ON schedule_fires(instance_id);
    "#,
    // 3: `wf restart` (SQLite's migration 9): the `set_state` patch a step's
    // success committed, and the step a run restarted from.
    r#"
    ALTER TABLE steps ADD COLUMN state_patch TEXT;
    ALTER TABLE runs ADD COLUMN restart_from TEXT;
    "#,
    // 4: (SQLite's migration 10) `wf list --status S` / `--workflow W` read
    // the newest matching instances off an index instead of walking every
    // instance newest first until LIMIT matched.
    r#"
    CREATE INDEX instances_by_status_created ON instances(status, created_at, seq);
    CREATE INDEX instances_by_workflow_created ON instances(workflow, created_at, seq);
    "#,
    // 5: no foreign keys on the tables a runner writes every step. Each row
    // inserted into them ran a referential check (a look-up of the
    // instance's row, as its own query inside the server), four to five
    // per `/bin/true` step. They guarded nothing the fence does not: every
    // write to these tables follows `check_fence`, which locks the
    // instance's row and aborts when the row is missing, or is made in the
    // transaction that inserts the instance (`copy_instance`); and `wf
    // prune` locks the instance's row before it deletes it and its rows.
    r#"
    ALTER TABLE steps DROP CONSTRAINT IF EXISTS steps_instance_id_fkey;
    ALTER TABLE attempts DROP CONSTRAINT IF EXISTS attempts_instance_id_fkey;
    ALTER TABLE spans DROP CONSTRAINT IF EXISTS spans_instance_id_fkey;
    "#,
    // 6: spans in fewer bytes (issue 16: 2,630 bytes a shell step, over
    // 2 KiB; the spans were 1,334 of them). A span's instance is its
    // `instances.seq`, not its id: 8 bytes instead of 33 in the row and in
    // the index, and an index that grows at its end as instances are
    // created instead of splitting pages at random ids (68% full). The
    // ids are binary (the trace id 16 bytes, span ids 8) instead of hex
    // text, the integers lead (no alignment padding), and `kind`, `status`
    // and `links` are null when they hold their defaults (`internal`,
    // `unset`, `[]`). The statements convert both ways, so a span reads
    // back the same text. Spans of no instance (none can exist: every
    // write is fenced on the instance's row) are not carried over.
    r#"
    CREATE TABLE spans_v6 (
        instance_seq    BIGINT NOT NULL,    -- instances.seq
        run             BIGINT NOT NULL,
        start_ns        BIGINT NOT NULL,
        end_ns          BIGINT NOT NULL,
        span_id         BIGINT NOT NULL,    -- the 8 bytes of the hex id
        parent_span_id  BIGINT,
        trace_id        BYTEA NOT NULL,     -- the 16 bytes of the hex id
        exported        BOOLEAN NOT NULL DEFAULT false,
        name            TEXT NOT NULL,
        kind            TEXT,               -- null: internal
        status          TEXT,               -- null: unset
        status_message  TEXT,
        attributes      TEXT NOT NULL,
        links           TEXT                -- null: []
    );
    INSERT INTO spans_v6
    SELECT i.seq, s.run, s.start_ns, s.end_ns, ('x' || s.span_id)::bit(64)::bigint,
           ('x' || s.parent_span_id)::bit(64)::bigint, decode(s.trace_id, 'hex'), s.exported,
           s.name, NULLIF(s.kind, 'internal'), NULLIF(s.status, 'unset'), s.status_message,
           s.attributes, NULLIF(s.links, '[]')
    FROM spans s JOIN instances i ON i.id = s.instance_id
    ORDER BY i.seq, s.run, s.start_ns;
    DROP TABLE spans;
    ALTER TABLE spans_v6 RENAME TO spans;
    CREATE INDEX spans_by_instance ON spans(instance_seq, run, start_ns);
    "#,
    // 7: a commit whose reply was lost is looked up, never guessed
    // (docs/postgres.md). Each fenced commit of a runner carries an id of its own, kept in
    // `last_commit` by the commit itself; sent again after the connection
    // was lost, a commit whose id is already there writes nothing and
    // succeeds. `check_commit` is `check_fence` that also does that: it
    // raises WF002 (the transaction is rolled back, and the store takes it
    // for success) when the commit is already in.
    r#"
    ALTER TABLE instances ADD COLUMN last_commit BIGINT;
    CREATE FUNCTION check_commit(p_id TEXT, p_epoch BIGINT, p_commit BIGINT) RETURNS BIGINT
    LANGUAGE plpgsql AS $$
    DECLARE
        e BIGINT;
        h TEXT;
        c BIGINT;
    BEGIN
        SELECT lease_epoch, lease_owner, last_commit INTO e, h, c FROM instances
            WHERE id = p_id FOR UPDATE;
        IF c IS NOT DISTINCT FROM p_commit THEN
            RAISE EXCEPTION USING ERRCODE = 'WF002', MESSAGE = 'committed already';
        END IF;
        IF e IS DISTINCT FROM p_epoch THEN
            RAISE EXCEPTION USING ERRCODE = 'WF001', MESSAGE = COALESCE(h, '');
        END IF;
        UPDATE instances SET last_commit = p_commit WHERE id = p_id;
        RETURN e;
    END $$;
    "#,
    // 8: sub-workflows, as SQLite's 11: a definition pins the definitions
    // of the workflows its `workflow:` steps call (path as written -> hash).
    // A child instance records the `workflow:` step attempt that made it.
    r#"
    ALTER TABLE definitions ADD COLUMN children TEXT;
    ALTER TABLE instances ADD COLUMN parent_id TEXT;
    ALTER TABLE instances ADD COLUMN parent_key TEXT;
    ALTER TABLE instances ADD COLUMN parent_attempt BIGINT;
    ALTER TABLE instances ADD COLUMN depth BIGINT NOT NULL DEFAULT 0;
    CREATE INDEX instances_by_parent ON instances(parent_id) WHERE parent_id IS NOT NULL;
    "#,
    // 9: an instance's labels (`labels:`, `wf run --label`), as SQLite's 13.
    r#"
    ALTER TABLE instances ADD COLUMN labels TEXT;
    "#,
    // 10: queues (`queue:`) and step locks (`lock:`), as SQLite's 14.
    r#"
    ALTER TABLE instances ADD COLUMN queue_key TEXT;
    ALTER TABLE instances ADD COLUMN queue_priority BIGINT NOT NULL DEFAULT 5;
    ALTER TABLE instances ADD COLUMN queue_limits TEXT;
    ALTER TABLE instances ADD COLUMN queue_hold BOOLEAN NOT NULL DEFAULT false;
    ALTER TABLE instances ADD COLUMN admitted BOOLEAN NOT NULL DEFAULT false;
    CREATE INDEX instances_by_queue ON instances(queue_key, admitted, status, queue_priority, created_at, seq)
        WHERE queue_key IS NOT NULL;
    CREATE TABLE admissions (queue_key TEXT NOT NULL, at_ms BIGINT NOT NULL);
    CREATE INDEX admissions_by_key ON admissions(queue_key, at_ms);
    CREATE TABLE locks (
        lock_key TEXT COLLATE "C" NOT NULL,
        instance_id TEXT NOT NULL,
        unit_key TEXT NOT NULL,
        PRIMARY KEY (lock_key, instance_id, unit_key)
    );
    CREATE INDEX locks_by_instance ON locks(instance_id);
    "#,
    // 11: a runner's write to an instance that holds a queue slot (or a
    // step lock) also needs its lease unexpired (by the server's clock): past its expiry,
    // an admission may give the slot away right after the write, and what
    // the write started would run beside the instance admitted in its
    // place (SQLite's `check_fence` does the same). WF001's message names
    // the holder, as before.
    r#"
    CREATE OR REPLACE FUNCTION check_fence(p_id TEXT, p_epoch BIGINT) RETURNS BIGINT
    LANGUAGE plpgsql AS $$
    DECLARE
        e BIGINT;
        h TEXT;
        a BOOLEAN;
        x BIGINT;
    BEGIN
        SELECT lease_epoch, lease_owner, admitted OR EXISTS (SELECT 1 FROM locks l WHERE l.instance_id = p_id),
            lease_expires_ms INTO e, h, a, x FROM instances WHERE id = p_id FOR UPDATE;
        IF e IS DISTINCT FROM p_epoch THEN
            RAISE EXCEPTION USING ERRCODE = 'WF001', MESSAGE = COALESCE(h, '');
        END IF;
        IF a AND x <= (extract(epoch from clock_timestamp()) * 1000)::bigint THEN
            RAISE EXCEPTION USING ERRCODE = 'WF001', MESSAGE = 'nobody (its lease expired while it held a queue slot, which may be given away)';
        END IF;
        RETURN e;
    END $$;
    CREATE OR REPLACE FUNCTION check_commit(p_id TEXT, p_epoch BIGINT, p_commit BIGINT) RETURNS BIGINT
    LANGUAGE plpgsql AS $$
    DECLARE
        e BIGINT;
        h TEXT;
        c BIGINT;
        a BOOLEAN;
        x BIGINT;
    BEGIN
        SELECT lease_epoch, lease_owner, last_commit,
            admitted OR EXISTS (SELECT 1 FROM locks l WHERE l.instance_id = p_id), lease_expires_ms
            INTO e, h, c, a, x FROM instances WHERE id = p_id FOR UPDATE;
        IF c IS NOT DISTINCT FROM p_commit THEN
            RAISE EXCEPTION USING ERRCODE = 'WF002', MESSAGE = 'committed already';
        END IF;
        IF e IS DISTINCT FROM p_epoch THEN
            RAISE EXCEPTION USING ERRCODE = 'WF001', MESSAGE = COALESCE(h, '');
        END IF;
        IF a AND x <= (extract(epoch from clock_timestamp()) * 1000)::bigint THEN
            RAISE EXCEPTION USING ERRCODE = 'WF001', MESSAGE = 'nobody (its lease expired while it held a queue slot, which may be given away)';
        END IF;
        UPDATE instances SET last_commit = p_commit WHERE id = p_id;
        RETURN e;
    END $$;
    "#,
    // 12: the registry of workflows (`wf workflow add`) and workers'
    // heartbeats, as SQLite's 15 (a heartbeat by the server's clock).
    r#"
    CREATE TABLE workflows (
        name             TEXT PRIMARY KEY,
        definition_hash  TEXT NOT NULL REFERENCES definitions(hash),
        workflow_path    TEXT NOT NULL,
        base_dir         TEXT NOT NULL,
        hook             TEXT UNIQUE,
        registered_at    TEXT NOT NULL
    );
    CREATE TABLE workers (
        name          TEXT PRIMARY KEY,
        started_ms    BIGINT NOT NULL,
        heartbeat_ms  BIGINT NOT NULL
    );
    "#,
    // 13: the keys that have queued instances, for a worker's look at
    // every wake-up (`queue.rs`, WAITING_KEYS): a skip over this index
    // reads one entry a key, where a DISTINCT read every queued row
    // (0.57 ms a look with 1,000 queued).
    r#"
    CREATE INDEX instances_queued_keys ON instances(queue_key)
        WHERE status = 'queued' AND NOT admitted;
    "#,
    // 14: what `/metrics` reports, kept in the commits that change it, as
    // SQLite's 17 keeps it (`store/metrics.rs`). Triggers append each
    // change to `metric_deltas` rather than add it to a total: an
    // increment of a shared total row would lock it until the commit,
    // making every commit of a fleet wait on the one before it (and two
    // commits that change two totals in opposite orders deadlock). Deltas
    // are folded into the totals by whoever takes the fold's advisory lock
    // first (a scrape, a worker's heartbeat, a prune), in one statement;
    // a scrape reads the totals and the deltas not folded yet. Pruning
    // deletes instances (their gauges fall) but never the counts of ended
    // attempts and runs. The counts of the history already there are made
    // once, here.
    r#"
    CREATE TABLE metric_counts (
        metric    TEXT COLLATE "C" NOT NULL,  -- instances, queue_admitted, queue_depth (gauges)
        workflow  TEXT COLLATE "C" NOT NULL,  -- '' for a queue's
        label     TEXT COLLATE "C" NOT NULL,  -- the status, or the queue key
        n         BIGINT NOT NULL,
        PRIMARY KEY (metric, workflow, label)
    );
    -- Ended attempts and runs by workflow, outcome and duration bucket (as
    -- SQLite's `metric_ends`).
    CREATE TABLE metric_ends (
        metric    TEXT COLLATE "C" NOT NULL,  -- attempts, runs
        workflow  TEXT COLLATE "C" NOT NULL,
        outcome   TEXT COLLATE "C" NOT NULL,
        bucket    INTEGER NOT NULL,           -- wf_bucket(seconds); -1: no duration
        count     BIGINT NOT NULL,
        sum       DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (metric, workflow, outcome, bucket)
    );
    CREATE TABLE metric_deltas (
        metric    TEXT NOT NULL,
        workflow  TEXT NOT NULL,
        label     TEXT NOT NULL,              -- a gauge's status or key; an end's outcome
        bucket    INTEGER,                    -- an end's bucket; NULL for a gauge's change
        n         BIGINT NOT NULL,
        seconds   DOUBLE PRECISION            -- an end's duration
    );

    -- The index of the first of store::metrics::BUCKETS at least `s`;
    -- 14: +Inf; -1: no duration.
    CREATE FUNCTION wf_bucket(s DOUBLE PRECISION) RETURNS INTEGER
    LANGUAGE sql IMMUTABLE AS $$
        SELECT CASE WHEN s IS NULL THEN -1 WHEN s <= 0.01 THEN 0 WHEN s <= 0.05 THEN 1 WHEN s <= 0.1 THEN 2
            WHEN s <= 0.25 THEN 3 WHEN s <= 0.5 THEN 4 WHEN s <= 1.0 THEN 5 WHEN s <= 2.5 THEN 6
            WHEN s <= 5.0 THEN 7 WHEN s <= 10.0 THEN 8 WHEN s <= 30.0 THEN 9 WHEN s <= 60.0 THEN 10
            WHEN s <= 300.0 THEN 11 WHEN s <= 900.0 THEN 12 WHEN s <= 3600.0 THEN 13 ELSE 14 END
    $$;

    CREATE FUNCTION wf_count_instance() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP <> 'INSERT' THEN
            INSERT INTO metric_deltas (metric, workflow, label, n) VALUES ('instances', OLD.workflow, OLD.status, -1);
            IF OLD.queue_key IS NOT NULL AND OLD.admitted THEN
                INSERT INTO metric_deltas (metric, workflow, label, n) VALUES ('queue_admitted', '', OLD.queue_key, -1);
            ELSIF OLD.queue_key IS NOT NULL AND OLD.status = 'queued' THEN
                INSERT INTO metric_deltas (metric, workflow, label, n) VALUES ('queue_depth', '', OLD.queue_key, -1);
            END IF;
        END IF;
        IF TG_OP <> 'DELETE' THEN
            INSERT INTO metric_deltas (metric, workflow, label, n) VALUES ('instances', NEW.workflow, NEW.status, 1);
            IF NEW.queue_key IS NOT NULL AND NEW.admitted THEN
                INSERT INTO metric_deltas (metric, workflow, label, n) VALUES ('queue_admitted', '', NEW.queue_key, 1);
            ELSIF NEW.queue_key IS NOT NULL AND NEW.status = 'queued' THEN
                INSERT INTO metric_deltas (metric, workflow, label, n) VALUES ('queue_depth', '', NEW.queue_key, 1);
            END IF;
        END IF;
        RETURN NULL;
    END $$;
    CREATE TRIGGER metrics_instance_added AFTER INSERT ON instances
        FOR EACH ROW EXECUTE FUNCTION wf_count_instance();
    CREATE TRIGGER metrics_instance_changed AFTER UPDATE OF workflow, status, queue_key, admitted ON instances
        FOR EACH ROW WHEN (OLD.workflow IS DISTINCT FROM NEW.workflow OR OLD.status IS DISTINCT FROM NEW.status
            OR OLD.queue_key IS DISTINCT FROM NEW.queue_key OR OLD.admitted IS DISTINCT FROM NEW.admitted)
        EXECUTE FUNCTION wf_count_instance();
    CREATE TRIGGER metrics_instance_deleted AFTER DELETE ON instances
        FOR EACH ROW EXECUTE FUNCTION wf_count_instance();

    -- An attempt's or a run's end (TG_ARGV[0]: attempts or runs): one delta.
    CREATE FUNCTION wf_count_end() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        s DOUBLE PRECISION;
    BEGIN
        s := extract(epoch from (NEW.finished_at::timestamptz - NEW.started_at::timestamptz))::float8;
        INSERT INTO metric_deltas (metric, workflow, label, bucket, n, seconds)
            VALUES (TG_ARGV[0], COALESCE((SELECT workflow FROM instances WHERE id = NEW.instance_id), ''),
                NEW.outcome, wf_bucket(s), 1, COALESCE(s, 0));
        RETURN NULL;
    END $$;
    CREATE TRIGGER metrics_attempt_ended AFTER UPDATE OF outcome ON attempts
        FOR EACH ROW WHEN (OLD.outcome IS NULL AND NEW.outcome IS NOT NULL)
        EXECUTE FUNCTION wf_count_end('attempts');
    -- A commit that starts and ends an attempt inserts it ended (batch.rs);
    -- a copy (`wf restart --as`, which sets wf.copying) inserts attempts
    -- and runs that ended in their source, counted there.
    CREATE TRIGGER metrics_attempt_inserted_ended AFTER INSERT ON attempts
        FOR EACH ROW WHEN (NEW.outcome IS NOT NULL AND current_setting('wf.copying', true) IS DISTINCT FROM 'on')
        EXECUTE FUNCTION wf_count_end('attempts');
    CREATE TRIGGER metrics_run_ended AFTER UPDATE OF outcome ON runs
        FOR EACH ROW WHEN (OLD.outcome IS NULL AND NEW.outcome IS NOT NULL)
        EXECUTE FUNCTION wf_count_end('runs');
    CREATE TRIGGER metrics_run_inserted_ended AFTER INSERT ON runs
        FOR EACH ROW WHEN (NEW.outcome IS NOT NULL AND current_setting('wf.copying', true) IS DISTINCT FROM 'on')
        EXECUTE FUNCTION wf_count_end('runs');

    INSERT INTO metric_counts (metric, workflow, label, n)
        SELECT 'instances', workflow, status, count(*) FROM instances GROUP BY workflow, status;
    INSERT INTO metric_counts (metric, workflow, label, n)
        SELECT 'queue_admitted', '', queue_key, count(*) FROM instances
        WHERE queue_key IS NOT NULL AND admitted GROUP BY queue_key;
    INSERT INTO metric_counts (metric, workflow, label, n)
        SELECT 'queue_depth', '', queue_key, count(*) FROM instances
        WHERE queue_key IS NOT NULL AND NOT admitted AND status = 'queued' GROUP BY queue_key;
    INSERT INTO metric_ends (metric, workflow, outcome, bucket, count, sum)
        SELECT 'attempts', w, o, wf_bucket(s), count(*), COALESCE(sum(s), 0) FROM (
            SELECT COALESCE(i.workflow, '') AS w, a.outcome AS o,
                extract(epoch from (a.finished_at::timestamptz - a.started_at::timestamptz))::float8 AS s
            FROM attempts a LEFT JOIN instances i ON i.id = a.instance_id
            WHERE a.outcome IS NOT NULL
        ) t GROUP BY 1, 2, 3, 4;
    INSERT INTO metric_ends (metric, workflow, outcome, bucket, count, sum)
        SELECT 'runs', w, o, wf_bucket(s), count(*), COALESCE(sum(s), 0) FROM (
            SELECT COALESCE(i.workflow, '') AS w, r.outcome AS o,
                extract(epoch from (r.finished_at::timestamptz - r.started_at::timestamptz))::float8 AS s
            FROM runs r LEFT JOIN instances i ON i.id = r.instance_id
            WHERE r.outcome IS NOT NULL
        ) t GROUP BY 1, 2, 3, 4;
    "#,
    // 15: who did what, and who may, as SQLite's 18 and 19: the actor that
    // started an instance; every action in the transaction of its change;
    // `wf serve`'s named tokens and browser sessions, as hashes.
    r#"
    ALTER TABLE instances ADD COLUMN started_by TEXT;
    CREATE TABLE actions (
        seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        instance_id  TEXT,
        at           TEXT NOT NULL,
        action       TEXT NOT NULL,
        actor        TEXT NOT NULL,
        detail       TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX actions_by_instance ON actions(instance_id, seq);
    CREATE TABLE tokens (
        name          TEXT PRIMARY KEY,
        hash          TEXT NOT NULL UNIQUE,
        scope         TEXT NOT NULL,
        created_at    TEXT NOT NULL,
        created_by    TEXT NOT NULL,
        last_used_at  TEXT
    );
    CREATE TABLE sessions (
        hash        TEXT PRIMARY KEY,
        token       TEXT NOT NULL,
        token_hash  TEXT NOT NULL,
        created_at  TEXT NOT NULL,
        seen_ms     BIGINT NOT NULL
    );
    CREATE INDEX sessions_by_token ON sessions(token);
    "#,
    // 16: which definition each run used, as SQLite's 20.
    r#"
    ALTER TABLE runs ADD COLUMN definition_hash TEXT;
    UPDATE runs r SET definition_hash = i.definition_hash FROM instances i WHERE i.id = r.instance_id;
    "#,
    // 17: what the instance list finds and counts, as SQLite's 21: the
    // counts of the instances without a parent beside those of all (the
    // trigger function made again with them), and the words of each
    // instance's error in a GIN index of their `simple` text search
    // vector (no stemming: a word is found as written, and as a prefix).
    r#"
    CREATE OR REPLACE FUNCTION wf_count_instance() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP <> 'INSERT' THEN
            INSERT INTO metric_deltas (metric, workflow, label, n) VALUES ('instances', OLD.workflow, OLD.status, -1);
            IF OLD.parent_id IS NULL THEN
                INSERT INTO metric_deltas (metric, workflow, label, n) VALUES ('roots', OLD.workflow, OLD.status, -1);
            END IF;
            IF OLD.queue_key IS NOT NULL AND OLD.admitted THEN
                INSERT INTO metric_deltas (metric, workflow, label, n) VALUES ('queue_admitted', '', OLD.queue_key, -1);
            ELSIF OLD.queue_key IS NOT NULL AND OLD.status = 'queued' THEN
                INSERT INTO metric_deltas (metric, workflow, label, n) VALUES ('queue_depth', '', OLD.queue_key, -1);
            END IF;
        END IF;
        IF TG_OP <> 'DELETE' THEN
            INSERT INTO metric_deltas (metric, workflow, label, n) VALUES ('instances', NEW.workflow, NEW.status, 1);
            IF NEW.parent_id IS NULL THEN
                INSERT INTO metric_deltas (metric, workflow, label, n) VALUES ('roots', NEW.workflow, NEW.status, 1);
            END IF;
            IF NEW.queue_key IS NOT NULL AND NEW.admitted THEN
                INSERT INTO metric_deltas (metric, workflow, label, n) VALUES ('queue_admitted', '', NEW.queue_key, 1);
            ELSIF NEW.queue_key IS NOT NULL AND NEW.status = 'queued' THEN
                INSERT INTO metric_deltas (metric, workflow, label, n) VALUES ('queue_depth', '', NEW.queue_key, 1);
            END IF;
        END IF;
        RETURN NULL;
    END $$;
    INSERT INTO metric_counts (metric, workflow, label, n)
        SELECT 'roots', workflow, status, count(*) FROM instances WHERE parent_id IS NULL
        GROUP BY workflow, status;
    CREATE INDEX instances_by_error_words ON instances
        USING gin (to_tsvector('simple', error)) WHERE error IS NOT NULL;
    "#,
    // 18: steps that need not run again (`cache:`), as SQLite's 22.
    r#"
    ALTER TABLE attempts ADD COLUMN cached_from TEXT;
    CREATE TABLE step_cache (
        workflow     TEXT COLLATE "C" NOT NULL,
        step_id      TEXT COLLATE "C" NOT NULL,
        cache_key    TEXT COLLATE "C" NOT NULL,
        part         TEXT COLLATE "C" NOT NULL,
        instance_id  TEXT NOT NULL,
        unit_key     TEXT NOT NULL,
        attempt      BIGINT NOT NULL,
        output       TEXT NOT NULL,
        state_patch  TEXT,
        created_at   TEXT NOT NULL,
        expires_ms   BIGINT,
        PRIMARY KEY (workflow, step_id, cache_key, part)
    );
    "#,
];
