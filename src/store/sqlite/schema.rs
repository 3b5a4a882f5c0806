//! Versioned migrations. The database's `PRAGMA user_version` is the number of
//! migrations applied; the pending ones run in one transaction, so a crash
//! during an upgrade leaves the previous version intact. Never edit a
//! migration that has shipped: append a new one, and bring [`CURRENT`] (what
//! a new database is made with) up to date; a test checks that the two make
//! the same schema.

/// Every migration, in order. Index + 1 is the schema version it produces.
pub const MIGRATIONS: &[&str] = &[
    // 1: instances, runs, steps, attempts, events.
    r#"
    -- Pinned workflow definitions, shared by the instances started from the
    -- same text. Kept out of `instances` so that the rows updated on every step
    -- stay small.
    CREATE TABLE definitions (
        hash      TEXT PRIMARY KEY,         -- sha256 of source, hex
        source    TEXT NOT NULL,
        step_ids  TEXT NOT NULL             -- JSON list of step ids in file order (for listings)
    ) WITHOUT ROWID;

    CREATE TABLE instances (
        id               TEXT PRIMARY KEY,
        workflow         TEXT NOT NULL,
        status           TEXT NOT NULL,
        definition_hash  TEXT NOT NULL REFERENCES definitions(hash),
        workflow_path    TEXT NOT NULL,     -- the file the instance was started from
        base_dir         TEXT NOT NULL,     -- folder `dir:` and relative commands resolve against
        inputs           TEXT NOT NULL,     -- JSON object
        state            TEXT NOT NULL,     -- JSON object, committed state
        error            TEXT,              -- why the instance failed, if it did
        wake_at          TEXT,              -- sleeping: when the next timer is due
        waiting_event    TEXT,              -- waiting: the event name awaited
        lease_owner      TEXT,              -- process holding the instance
        lease_expires_ms INTEGER,           -- unix ms; a lease past this is dead
        created_at       TEXT NOT NULL,
        updated_at       TEXT NOT NULL
    );
    CREATE INDEX instances_by_created ON instances(created_at);
    CREATE INDEX instances_by_status ON instances(status, wake_at);

    CREATE TABLE runs (
        instance_id  TEXT NOT NULL REFERENCES instances(id),
        number       INTEGER NOT NULL,
        outcome      TEXT,                   -- NULL while the run is in progress
        started_at   TEXT NOT NULL,
        finished_at  TEXT,
        PRIMARY KEY (instance_id, number)
    ) WITHOUT ROWID;

    CREATE TABLE steps (
        instance_id    TEXT NOT NULL REFERENCES instances(id),
        key            TEXT NOT NULL,        -- step id, or id[n] for a for_each item
        step_id        TEXT NOT NULL,
        status         TEXT NOT NULL,        -- running, completed, failed, skipped, sleeping, waiting, pending
        attempts       INTEGER NOT NULL DEFAULT 0,
        budget_base    INTEGER NOT NULL DEFAULT 0, -- attempts at or below this don't count (--retry-failed)
        outcome        TEXT,                 -- outcome of the last attempt
        error_type     TEXT,
        error_message  TEXT,
        output         TEXT,                 -- JSON, set on success only
        started_at     TEXT,
        finished_at    TEXT,
        retry_at       TEXT,                 -- when the next attempt or timer is due
        seq            INTEGER,              -- completion order (for compensation)
        PRIMARY KEY (instance_id, key)
    ) WITHOUT ROWID;

    CREATE TABLE attempts (
        instance_id    TEXT NOT NULL REFERENCES instances(id),
        step_key       TEXT NOT NULL,
        attempt        INTEGER NOT NULL,
        run            INTEGER NOT NULL,
        outcome        TEXT,                 -- NULL while in flight; crashed if the process died
        error_type     TEXT,
        error_message  TEXT,
        exit_code      INTEGER,
        started_at     TEXT NOT NULL,
        finished_at    TEXT,
        stdout         BLOB,
        stderr         BLOB,
        PRIMARY KEY (instance_id, step_key, attempt)
    ) WITHOUT ROWID;

    CREATE TABLE events (
        id           INTEGER PRIMARY KEY,
        instance_id  TEXT NOT NULL REFERENCES instances(id),
        name         TEXT NOT NULL,
        payload      TEXT NOT NULL,          -- JSON
        traceparent  TEXT,
        received_at  TEXT NOT NULL,
        consumed_by  TEXT                    -- step key that took it
    );
    CREATE INDEX events_by_instance ON events(instance_id, name, consumed_by);
    "#,
    // 2: traces. Each run is a trace; every finished span is stored so `wf trace`
    // works after the fact, and ids are stable across calls.
    r#"
    ALTER TABLE runs ADD COLUMN trace_id TEXT;
    ALTER TABLE runs ADD COLUMN span_id TEXT;
    ALTER TABLE runs ADD COLUMN parent_span_id TEXT;
    ALTER TABLE runs ADD COLUMN started_ns INTEGER;
    ALTER TABLE attempts ADD COLUMN span_id TEXT;
    ALTER TABLE attempts ADD COLUMN started_ns INTEGER;
    CREATE TABLE spans (
        trace_id        TEXT NOT NULL,          -- 32 hex
        span_id         TEXT NOT NULL,          -- 16 hex
        parent_span_id  TEXT,
        instance_id     TEXT NOT NULL REFERENCES instances(id),
        run             INTEGER NOT NULL,
        name            TEXT NOT NULL,
        kind            TEXT NOT NULL DEFAULT 'internal',   -- internal, client
        start_ns        INTEGER NOT NULL,       -- unix nanoseconds
        end_ns          INTEGER NOT NULL,
        status          TEXT NOT NULL DEFAULT 'unset',      -- unset, ok, error
        status_message  TEXT,
        attributes      TEXT NOT NULL DEFAULT '{}',         -- JSON object
        links           TEXT NOT NULL DEFAULT '[]',         -- JSON [{trace_id, span_id, attributes}]
        exported        INTEGER NOT NULL DEFAULT 0          -- sent to the live OTLP endpoint
    );
    -- A rowid table: spans are appended in the order they end, which keeps
    -- inserts at the end of the b-tree (random ids as the key would not).
    CREATE UNIQUE INDEX spans_by_id ON spans(trace_id, span_id);
    CREATE INDEX spans_by_instance ON spans(instance_id, run, start_ns);
    "#,
    // 3: control flow. `for_each` pins the list it fans out over; `wf cancel`
    // asks a running process to stop.
    r#"
    ALTER TABLE steps ADD COLUMN items TEXT;                  -- JSON list a for_each step fans out over
    ALTER TABLE instances ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;
    "#,
    // 4: the validated form of a pinned definition (JSON tagged with the wf
    // version that wrote it), so a resume need not parse the YAML again. The
    // text stays the definition; this is a cache of it, ignored when stale.
    r#"
    ALTER TABLE definitions ADD COLUMN compiled TEXT;
    "#,
    // 5: no index on span ids. Random ids as an index key land all over its
    // b-tree: every span insert touched a random page (37 µs a step of a
    // 10,000-step run). Spans are found by instance (spans_by_instance).
    r#"
    DROP INDEX spans_by_id;
    "#,
    // 6: one owner at a time (docs/execution.md). `lease_epoch` is the fencing token:
    // every takeover raises it, and every write of a runner is refused unless
    // it carries the current one. An attempt's process group is recorded with
    // the host it runs on, so the next runner on that host can end what a
    // crashed or lost attempt left behind (the leader's start time keeps a
    // reused pid from being taken for it).
    r#"
    ALTER TABLE instances ADD COLUMN lease_epoch INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE attempts ADD COLUMN proc_host TEXT;      -- hostname/boot id of the runner's machine
    ALTER TABLE attempts ADD COLUMN proc_pgid INTEGER;   -- the step's process group (= its leader's pid)
    ALTER TABLE attempts ADD COLUMN proc_start INTEGER;  -- the leader's start time, clock ticks after boot
    "#,
    // 7: the result of a completed instance (`outputs:`, `wf result`).
    r#"
    ALTER TABLE instances ADD COLUMN outputs TEXT;  -- JSON object, set when the instance completes
    "#,
    // 8: schedules ([`SCHEDULES`]).
    SCHEDULES,
    // 9: `wf restart`. A step's success records the `set_state` patch it
    // committed, so that a restart rebuilds the state from the kept steps'
    // patches in commit order (`seq`); a run records the step it restarted from.
    r#"
    ALTER TABLE steps ADD COLUMN state_patch TEXT;  -- JSON merge patch committed with the step's success
    ALTER TABLE runs ADD COLUMN restart_from TEXT;  -- `wf restart --from STEP`: STEP
    "#,
    // 10: `wf list` by status or workflow ([`LIST_INDEXES`]).
    LIST_INDEXES,
    // 11: sub-workflows. A definition pins the definitions of the workflows
    // its `workflow:` steps call, by the path as written: a resume runs the
    // children it was started with, whatever their files say now.
    // A child instance records the `workflow:` step attempt that made it.
    r#"
    ALTER TABLE definitions ADD COLUMN children TEXT;  -- JSON object: path as written -> hash
    ALTER TABLE instances ADD COLUMN parent_id TEXT;        -- the parent instance, for a child
    ALTER TABLE instances ADD COLUMN parent_key TEXT;       -- the parent's unit key (step or item)
    ALTER TABLE instances ADD COLUMN parent_attempt INTEGER;
    ALTER TABLE instances ADD COLUMN depth INTEGER NOT NULL DEFAULT 0;  -- parents above it
    "#,
    // 12: a parent's children, found by its id ([`PARENT_INDEX`]).
    PARENT_INDEX,
    // 13: an instance's labels (`labels:`, `wf run --label`).
    r#"
    ALTER TABLE instances ADD COLUMN labels TEXT;  -- JSON object: label -> value
    "#,
    // 14: queues (`queue:`) and step locks (`lock:`). An instance records
    // its key, priority and limits, and whether it holds one of the key's
    // slots; `admissions` records when each admission was, for `rate`;
    // `locks` holds a row per attempt holding a step lock.
    r#"
    ALTER TABLE instances ADD COLUMN queue_key TEXT;  -- `queue.key` rendered; NULL: no queue
    ALTER TABLE instances ADD COLUMN queue_priority INTEGER NOT NULL DEFAULT 5;
    ALTER TABLE instances ADD COLUMN queue_limits TEXT;  -- JSON: store::queue::QueueLimits
    ALTER TABLE instances ADD COLUMN queue_hold INTEGER NOT NULL DEFAULT 0;  -- keeps its slot while suspended
    ALTER TABLE instances ADD COLUMN admitted INTEGER NOT NULL DEFAULT 0;  -- holds a slot of its key
    "#,
    QUEUES,
    // 15: the registry of workflows, and workers' heartbeats ([`REGISTRY`]).
    REGISTRY,
    // 17: `/metrics`' counts, kept by triggers ([`METRICS`]).
    METRICS,
    // 18: who started an instance (SPEC §3 Actions are recorded): the
    // actor of its `start` action, beside the row for the list.
    r#"
    ALTER TABLE instances ADD COLUMN started_by TEXT;  -- `cli:USER@HOST`, `token:NAME`, ...
    "#,
    // 19: who did what, and who may ([`ACCESS`]).
    ACCESS,
    // 20: which definition each run used (SPEC §3 Upgrades: `wf upgrade`
    // moves an instance onto another between two runs). The runs already
    // there used the instance's one: no upgrade existed before this.
    r#"
    ALTER TABLE runs ADD COLUMN definition_hash TEXT;
    UPDATE runs SET definition_hash =
        (SELECT i.definition_hash FROM instances i WHERE i.id = runs.instance_id);
    "#,
    // 21: the inspector's list at any size ([`FINDING`]).
    FINDING,
    // 22: steps that need not run again (`cache:`): the attempt a `cached`
    // one took its result from, and the results kept ([`STEP_CACHE`]).
    r#"
    ALTER TABLE attempts ADD COLUMN cached_from TEXT;  -- `cached`: INSTANCE#ATTEMPT it took its result from
    "#,
    STEP_CACHE,
];

// 22: the results of completed attempts of `cache:` steps, by workflow,
// step, rendered key and the unit's value (the SHA-256 of an item's or a
// combination's JSON; '' for a step's own unit). Kept apart from the
// history: a prune of the instance an entry came from keeps the entry
// (naming that instance still), and removes the entries past their
// `expires_ms` (the `ttl` of the step that made them).
const STEP_CACHE: &str = r#"
    CREATE TABLE step_cache (
        workflow     TEXT NOT NULL,
        step_id      TEXT NOT NULL,
        cache_key    TEXT NOT NULL,
        part         TEXT NOT NULL,
        instance_id  TEXT NOT NULL,     -- whose attempt made it (no reference: it outlives a prune)
        unit_key     TEXT NOT NULL,
        attempt      INTEGER NOT NULL,
        output       TEXT NOT NULL,     -- JSON
        state_patch  TEXT,              -- JSON merge patch, NULL: none
        created_at   TEXT NOT NULL,
        expires_ms   INTEGER,           -- NULL: kept until replaced
        PRIMARY KEY (workflow, step_id, cache_key, part)
    ) WITHOUT ROWID;
    "#;

// 21: what the instance list finds and counts (issue 59) at a million
// instances. Counts by status of the instances without a parent (the
// list's default view) kept beside those of every instance, by the same
// triggers (`roots`: the three triggers are made again with it); and the
// words of each instance's error, in an FTS5 index, for the list's search
// over errors. The index keeps its own copy of each error (an index
// without one, `contentless_delete`, needs SQLite 3.43, and the sqlite3
// of Debian 12 or of a Python could then not read or dump the file), and
// its rowids are those of `instance_error_ids`, an INTEGER PRIMARY KEY
// that keeps its values through a VACUUM (`wf prune` makes one), which a
// table's implicit rowid does not.
const FINDING: &str = r#"
    DROP TRIGGER metrics_instance_added;
    DROP TRIGGER metrics_instance_changed;
    DROP TRIGGER metrics_instance_deleted;
    CREATE TRIGGER metrics_instance_added AFTER INSERT ON instances BEGIN
        INSERT INTO metric_counts (metric, workflow, label, n)
            SELECT m, w, l, 1 FROM (
                SELECT 'instances' AS m, NEW.workflow AS w, NEW.status AS l
                UNION ALL SELECT 'roots', NEW.workflow, NEW.status WHERE NEW.parent_id IS NULL
                UNION ALL SELECT 'queue_admitted', '', NEW.queue_key WHERE NEW.queue_key IS NOT NULL AND NEW.admitted
                UNION ALL SELECT 'queue_depth', '', NEW.queue_key
                    WHERE NEW.queue_key IS NOT NULL AND NOT NEW.admitted AND NEW.status = 'queued'
            ) WHERE true
            ON CONFLICT (metric, workflow, label) DO UPDATE SET n = n + excluded.n;
    END;
    CREATE TRIGGER metrics_instance_changed AFTER UPDATE OF workflow, status, queue_key, admitted ON instances
    WHEN OLD.workflow IS NOT NEW.workflow OR OLD.status IS NOT NEW.status
        OR OLD.queue_key IS NOT NEW.queue_key OR OLD.admitted IS NOT NEW.admitted BEGIN
        INSERT INTO metric_counts (metric, workflow, label, n)
            SELECT m, w, l, sum(d) FROM (
                SELECT 'instances' AS m, OLD.workflow AS w, OLD.status AS l, -1 AS d
                UNION ALL SELECT 'instances', NEW.workflow, NEW.status, 1
                UNION ALL SELECT 'roots', OLD.workflow, OLD.status, -1 WHERE OLD.parent_id IS NULL
                UNION ALL SELECT 'roots', NEW.workflow, NEW.status, 1 WHERE NEW.parent_id IS NULL
                UNION ALL SELECT 'queue_admitted', '', OLD.queue_key, -1 WHERE OLD.queue_key IS NOT NULL AND OLD.admitted
                UNION ALL SELECT 'queue_admitted', '', NEW.queue_key, 1 WHERE NEW.queue_key IS NOT NULL AND NEW.admitted
                UNION ALL SELECT 'queue_depth', '', OLD.queue_key, -1
                    WHERE OLD.queue_key IS NOT NULL AND NOT OLD.admitted AND OLD.status = 'queued'
                UNION ALL SELECT 'queue_depth', '', NEW.queue_key, 1
                    WHERE NEW.queue_key IS NOT NULL AND NOT NEW.admitted AND NEW.status = 'queued'
            ) WHERE true GROUP BY m, w, l HAVING sum(d) <> 0
            ON CONFLICT (metric, workflow, label) DO UPDATE SET n = n + excluded.n;
        DELETE FROM metric_counts WHERE metric IN ('queue_admitted', 'queue_depth') AND workflow = ''
            AND label IN (OLD.queue_key, NEW.queue_key) AND n = 0;
    END;
    CREATE TRIGGER metrics_instance_deleted AFTER DELETE ON instances BEGIN
        INSERT INTO metric_counts (metric, workflow, label, n)
            SELECT m, w, l, -1 FROM (
                SELECT 'instances' AS m, OLD.workflow AS w, OLD.status AS l
                UNION ALL SELECT 'roots', OLD.workflow, OLD.status WHERE OLD.parent_id IS NULL
                UNION ALL SELECT 'queue_admitted', '', OLD.queue_key WHERE OLD.queue_key IS NOT NULL AND OLD.admitted
                UNION ALL SELECT 'queue_depth', '', OLD.queue_key
                    WHERE OLD.queue_key IS NOT NULL AND NOT OLD.admitted AND OLD.status = 'queued'
            ) WHERE true
            ON CONFLICT (metric, workflow, label) DO UPDATE SET n = n + excluded.n;
        DELETE FROM metric_counts WHERE metric IN ('queue_admitted', 'queue_depth') AND workflow = ''
            AND label = OLD.queue_key AND n = 0;
    END;
    INSERT INTO metric_counts (metric, workflow, label, n)
        SELECT 'roots', workflow, status, count(*) FROM instances WHERE parent_id IS NULL
        GROUP BY workflow, status;

    CREATE TABLE instance_error_ids (
        n            INTEGER PRIMARY KEY,   -- the instance's rowid in instance_errors
        instance_id  TEXT NOT NULL UNIQUE
    );
    CREATE VIRTUAL TABLE instance_errors USING fts5(error);
    CREATE TRIGGER errors_added AFTER INSERT ON instances WHEN NEW.error IS NOT NULL BEGIN
        INSERT INTO instance_error_ids (instance_id) VALUES (NEW.id);
        INSERT INTO instance_errors (rowid, error)
            SELECT n, NEW.error FROM instance_error_ids WHERE instance_id = NEW.id;
    END;
    CREATE TRIGGER errors_changed AFTER UPDATE OF error ON instances WHEN OLD.error IS NOT NEW.error BEGIN
        DELETE FROM instance_errors WHERE rowid = (SELECT n FROM instance_error_ids WHERE instance_id = OLD.id);
        DELETE FROM instance_error_ids WHERE instance_id = OLD.id;
        INSERT INTO instance_error_ids (instance_id) SELECT NEW.id WHERE NEW.error IS NOT NULL;
        INSERT INTO instance_errors (rowid, error)
            SELECT n, NEW.error FROM instance_error_ids WHERE instance_id = NEW.id AND NEW.error IS NOT NULL;
    END;
    CREATE TRIGGER errors_deleted AFTER DELETE ON instances WHEN OLD.error IS NOT NULL BEGIN
        DELETE FROM instance_errors WHERE rowid = (SELECT n FROM instance_error_ids WHERE instance_id = OLD.id);
        DELETE FROM instance_error_ids WHERE instance_id = OLD.id;
    END;
    INSERT INTO instance_error_ids (instance_id)
        SELECT id FROM instances WHERE error IS NOT NULL ORDER BY created_at;
    INSERT INTO instance_errors (rowid, error)
        SELECT e.n, i.error FROM instance_error_ids e JOIN instances i ON i.id = e.instance_id;
"#;

// 19: every action that changed an instance or the registry, in the
// transaction of its change (`store/actions.rs`); `wf serve`'s named
// tokens, as hashes (a token is 256 random bits: SHA-256 of it is as good
// as a slow hash, and is found by index); its browser sessions, as hashes
// of their ids, with the token that signed them in (name and hash: a
// revoked token's sessions end with it).
const ACCESS: &str = r#"
    CREATE TABLE actions (
        seq          INTEGER PRIMARY KEY,   -- the order they were recorded in
        instance_id  TEXT,                  -- NULL: the registry, a token, a prune's batch
        at           TEXT NOT NULL,
        action       TEXT NOT NULL,         -- start, signal, cancel, ... (vocab::ActionKind)
        actor        TEXT NOT NULL,         -- cli:USER@HOST, token:NAME, ... (vocab::Actor)
        detail       TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX actions_by_instance ON actions(instance_id, seq);
    CREATE TABLE tokens (
        name          TEXT PRIMARY KEY,
        hash          TEXT NOT NULL UNIQUE,  -- SHA-256 of the token, hex; never the token
        scope         TEXT NOT NULL,         -- read, operate, admin
        created_at    TEXT NOT NULL,
        created_by    TEXT NOT NULL,
        last_used_at  TEXT                   -- kept at most once a minute a server
    ) WITHOUT ROWID;
    CREATE TABLE sessions (
        hash        TEXT PRIMARY KEY,        -- SHA-256 of the session's id, hex
        token       TEXT NOT NULL,           -- the name of the token that signed it in
        token_hash  TEXT NOT NULL,           -- and which token of that name
        created_at  TEXT NOT NULL,
        seen_ms     INTEGER NOT NULL         -- last used, unix ms: idle expiry counts from here
    ) WITHOUT ROWID;
    CREATE INDEX sessions_by_token ON sessions(token);
    "#;

// 17: what `/metrics` reports, kept in the commits that change it
// (`store/metrics.rs`): triggers count each change of an instance's
// status or queue standing, and each attempt's and run's end, in the
// transaction that makes it, so a scrape reads a few rows however long the
// history. Pruning deletes instances (their gauges fall) but never the
// counts of ended attempts and runs (counters never go down). The counts
// of the history already there are made once, here. An attempt or run is
// inserted open and ended by an update, which is what is counted: the
// ended rows a copy inserts (`wf restart --as`) were counted in their
// source.
const METRICS: &str = r#"
    CREATE TABLE metric_counts (
        metric    TEXT NOT NULL,     -- instances, queue_admitted, queue_depth (gauges)
        workflow  TEXT NOT NULL,     -- '' for a queue's
        label     TEXT NOT NULL,     -- the status, or the queue key
        n         INTEGER NOT NULL,
        PRIMARY KEY (metric, workflow, label)
    ) WITHOUT ROWID;
    -- Ended attempts and runs, by workflow, outcome and duration bucket:
    -- one row a kind, so that an end is one upsert (the counters by outcome
    -- and the histograms by workflow are its sums).
    CREATE TABLE metric_ends (
        metric    TEXT NOT NULL,     -- attempts, runs
        workflow  TEXT NOT NULL,
        outcome   TEXT NOT NULL,
        bucket    INTEGER NOT NULL,  -- index of the first of store::metrics::BUCKETS at least the duration; 14: +Inf; -1: no duration
        count     INTEGER NOT NULL,
        sum       REAL NOT NULL,     -- seconds
        PRIMARY KEY (metric, workflow, outcome, bucket)
    ) WITHOUT ROWID;

    CREATE TRIGGER metrics_instance_added AFTER INSERT ON instances BEGIN
        INSERT INTO metric_counts (metric, workflow, label, n)
            SELECT m, w, l, 1 FROM (
                SELECT 'instances' AS m, NEW.workflow AS w, NEW.status AS l
                UNION ALL SELECT 'queue_admitted', '', NEW.queue_key WHERE NEW.queue_key IS NOT NULL AND NEW.admitted
                UNION ALL SELECT 'queue_depth', '', NEW.queue_key
                    WHERE NEW.queue_key IS NOT NULL AND NOT NEW.admitted AND NEW.status = 'queued'
            ) WHERE true
            ON CONFLICT (metric, workflow, label) DO UPDATE SET n = n + excluded.n;
    END;
    CREATE TRIGGER metrics_instance_changed AFTER UPDATE OF workflow, status, queue_key, admitted ON instances
    WHEN OLD.workflow IS NOT NEW.workflow OR OLD.status IS NOT NEW.status
        OR OLD.queue_key IS NOT NEW.queue_key OR OLD.admitted IS NOT NEW.admitted BEGIN
        INSERT INTO metric_counts (metric, workflow, label, n)
            SELECT m, w, l, sum(d) FROM (
                SELECT 'instances' AS m, OLD.workflow AS w, OLD.status AS l, -1 AS d
                UNION ALL SELECT 'instances', NEW.workflow, NEW.status, 1
                UNION ALL SELECT 'queue_admitted', '', OLD.queue_key, -1 WHERE OLD.queue_key IS NOT NULL AND OLD.admitted
                UNION ALL SELECT 'queue_admitted', '', NEW.queue_key, 1 WHERE NEW.queue_key IS NOT NULL AND NEW.admitted
                UNION ALL SELECT 'queue_depth', '', OLD.queue_key, -1
                    WHERE OLD.queue_key IS NOT NULL AND NOT OLD.admitted AND OLD.status = 'queued'
                UNION ALL SELECT 'queue_depth', '', NEW.queue_key, 1
                    WHERE NEW.queue_key IS NOT NULL AND NOT NEW.admitted AND NEW.status = 'queued'
            ) WHERE true GROUP BY m, w, l HAVING sum(d) <> 0
            ON CONFLICT (metric, workflow, label) DO UPDATE SET n = n + excluded.n;
        DELETE FROM metric_counts WHERE metric IN ('queue_admitted', 'queue_depth') AND workflow = ''
            AND label IN (OLD.queue_key, NEW.queue_key) AND n = 0;
    END;
    CREATE TRIGGER metrics_instance_deleted AFTER DELETE ON instances BEGIN
        INSERT INTO metric_counts (metric, workflow, label, n)
            SELECT m, w, l, -1 FROM (
                SELECT 'instances' AS m, OLD.workflow AS w, OLD.status AS l
                UNION ALL SELECT 'queue_admitted', '', OLD.queue_key WHERE OLD.queue_key IS NOT NULL AND OLD.admitted
                UNION ALL SELECT 'queue_depth', '', OLD.queue_key
                    WHERE OLD.queue_key IS NOT NULL AND NOT OLD.admitted AND OLD.status = 'queued'
            ) WHERE true
            ON CONFLICT (metric, workflow, label) DO UPDATE SET n = n + excluded.n;
        DELETE FROM metric_counts WHERE metric IN ('queue_admitted', 'queue_depth') AND workflow = ''
            AND label = OLD.queue_key AND n = 0;
    END;
    CREATE TRIGGER metrics_attempt_ended AFTER UPDATE OF outcome ON attempts
    WHEN OLD.outcome IS NULL AND NEW.outcome IS NOT NULL BEGIN
        INSERT INTO metric_ends (metric, workflow, outcome, bucket, count, sum)
            SELECT 'attempts', COALESCE((SELECT workflow FROM instances WHERE id = NEW.instance_id), ''),
                NEW.outcome, CASE WHEN s IS NULL THEN -1 WHEN s <= 0.01 THEN 0 WHEN s <= 0.05 THEN 1 WHEN s <= 0.1 THEN 2
                 WHEN s <= 0.25 THEN 3 WHEN s <= 0.5 THEN 4 WHEN s <= 1.0 THEN 5 WHEN s <= 2.5 THEN 6
                 WHEN s <= 5.0 THEN 7 WHEN s <= 10.0 THEN 8 WHEN s <= 30.0 THEN 9 WHEN s <= 60.0 THEN 10
                 WHEN s <= 300.0 THEN 11 WHEN s <= 900.0 THEN 12 WHEN s <= 3600.0 THEN 13 ELSE 14 END, 1, COALESCE(s, 0)
            FROM (SELECT (julianday(NEW.finished_at) - julianday(NEW.started_at)) * 86400.0 AS s) WHERE true
            ON CONFLICT (metric, workflow, outcome, bucket) DO UPDATE SET count = count + 1, sum = sum + excluded.sum;
    END;
    CREATE TRIGGER metrics_run_ended AFTER UPDATE OF outcome ON runs
    WHEN OLD.outcome IS NULL AND NEW.outcome IS NOT NULL BEGIN
        INSERT INTO metric_ends (metric, workflow, outcome, bucket, count, sum)
            SELECT 'runs', COALESCE((SELECT workflow FROM instances WHERE id = NEW.instance_id), ''),
                NEW.outcome, CASE WHEN s IS NULL THEN -1 WHEN s <= 0.01 THEN 0 WHEN s <= 0.05 THEN 1 WHEN s <= 0.1 THEN 2
                 WHEN s <= 0.25 THEN 3 WHEN s <= 0.5 THEN 4 WHEN s <= 1.0 THEN 5 WHEN s <= 2.5 THEN 6
                 WHEN s <= 5.0 THEN 7 WHEN s <= 10.0 THEN 8 WHEN s <= 30.0 THEN 9 WHEN s <= 60.0 THEN 10
                 WHEN s <= 300.0 THEN 11 WHEN s <= 900.0 THEN 12 WHEN s <= 3600.0 THEN 13 ELSE 14 END, 1, COALESCE(s, 0)
            FROM (SELECT (julianday(NEW.finished_at) - julianday(NEW.started_at)) * 86400.0 AS s) WHERE true
            ON CONFLICT (metric, workflow, outcome, bucket) DO UPDATE SET count = count + 1, sum = sum + excluded.sum;
    END;

    INSERT INTO metric_counts (metric, workflow, label, n)
        SELECT 'instances', workflow, status, count(*) FROM instances GROUP BY workflow, status;
    INSERT INTO metric_counts (metric, workflow, label, n)
        SELECT 'queue_admitted', '', queue_key, count(*) FROM instances
        WHERE queue_key IS NOT NULL AND admitted GROUP BY queue_key;
    INSERT INTO metric_counts (metric, workflow, label, n)
        SELECT 'queue_depth', '', queue_key, count(*) FROM instances
        WHERE queue_key IS NOT NULL AND NOT admitted AND status = 'queued' GROUP BY queue_key;
    INSERT INTO metric_ends (metric, workflow, outcome, bucket, count, sum)
        SELECT 'attempts', w, o, CASE WHEN s IS NULL THEN -1 WHEN s <= 0.01 THEN 0 WHEN s <= 0.05 THEN 1 WHEN s <= 0.1 THEN 2
                 WHEN s <= 0.25 THEN 3 WHEN s <= 0.5 THEN 4 WHEN s <= 1.0 THEN 5 WHEN s <= 2.5 THEN 6
                 WHEN s <= 5.0 THEN 7 WHEN s <= 10.0 THEN 8 WHEN s <= 30.0 THEN 9 WHEN s <= 60.0 THEN 10
                 WHEN s <= 300.0 THEN 11 WHEN s <= 900.0 THEN 12 WHEN s <= 3600.0 THEN 13 ELSE 14 END AS b, count(*), COALESCE(sum(s), 0) FROM (
            SELECT COALESCE(i.workflow, '') AS w, a.outcome AS o,
                (julianday(a.finished_at) - julianday(a.started_at)) * 86400.0 AS s
            FROM attempts a LEFT JOIN instances i ON i.id = a.instance_id
            WHERE a.outcome IS NOT NULL
        ) GROUP BY w, o, b;
    INSERT INTO metric_ends (metric, workflow, outcome, bucket, count, sum)
        SELECT 'runs', w, o, CASE WHEN s IS NULL THEN -1 WHEN s <= 0.01 THEN 0 WHEN s <= 0.05 THEN 1 WHEN s <= 0.1 THEN 2
                 WHEN s <= 0.25 THEN 3 WHEN s <= 0.5 THEN 4 WHEN s <= 1.0 THEN 5 WHEN s <= 2.5 THEN 6
                 WHEN s <= 5.0 THEN 7 WHEN s <= 10.0 THEN 8 WHEN s <= 30.0 THEN 9 WHEN s <= 60.0 THEN 10
                 WHEN s <= 300.0 THEN 11 WHEN s <= 900.0 THEN 12 WHEN s <= 3600.0 THEN 13 ELSE 14 END AS b, count(*), COALESCE(sum(s), 0) FROM (
            SELECT COALESCE(i.workflow, '') AS w, r.outcome AS o,
                (julianday(r.finished_at) - julianday(r.started_at)) * 86400.0 AS s
            FROM runs r LEFT JOIN instances i ON i.id = r.instance_id
            WHERE r.outcome IS NOT NULL
        ) GROUP BY w, o, b;
    "#;

// 15: the registry (`wf workflow add`): a definition pinned under a
// workflow's name, which `wf serve` starts by name, and the hook its
// `on.webhook` answers at (unique: one workflow per hook). And each
// worker's heartbeat (`/metrics`: worker liveness), written as it polls.
const REGISTRY: &str = r#"
    CREATE TABLE workflows (
        name             TEXT PRIMARY KEY,
        definition_hash  TEXT NOT NULL REFERENCES definitions(hash),
        workflow_path    TEXT NOT NULL,
        base_dir         TEXT NOT NULL,
        hook             TEXT UNIQUE,          -- on.webhook.name
        registered_at    TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE workers (
        name          TEXT PRIMARY KEY,        -- the worker's lease owner name
        started_ms    INTEGER NOT NULL,
        heartbeat_ms  INTEGER NOT NULL         -- unix ms of its last poll
    ) WITHOUT ROWID;
    "#;

// 14: a key's admitted instances and its line (by priority, then age) are
// read off one index that holds only the instances that have a queue (the
// keys with queued instances, a worker's look, off `instances_by_status`).
const QUEUES: &str = r#"
    CREATE INDEX instances_by_queue ON instances(queue_key, admitted, status, queue_priority, created_at)
        WHERE queue_key IS NOT NULL;
    CREATE TABLE admissions (
        queue_key  TEXT NOT NULL,
        at_ms      INTEGER NOT NULL      -- unix ms of an admission (`rate`)
    );
    CREATE INDEX admissions_by_key ON admissions(queue_key, at_ms);
    CREATE TABLE locks (
        lock_key     TEXT NOT NULL,      -- a step `lock:`'s key, rendered
        instance_id  TEXT NOT NULL,
        unit_key     TEXT NOT NULL,      -- the unit whose attempt holds it
        PRIMARY KEY (lock_key, instance_id, unit_key)
    ) WITHOUT ROWID;
    CREATE INDEX locks_by_instance ON locks(instance_id);
    "#;

// 12: `wf inspect PARENT` and a parent's cancel find its children off an
// index that holds only children.
const PARENT_INDEX: &str = r#"
    CREATE INDEX instances_by_parent ON instances(parent_id) WHERE parent_id IS NOT NULL;
    "#;

// 8: schedules (`wf schedule add`). A row per `on.schedule` entry holds
// the next fire time not yet taken; a worker takes a fire time by moving
// it on only if it is still the one it read, in the transaction that
// creates the instance, so a fire time starts one instance however many
// workers run. `schedule_fires` records which fire time started which
// instance (`wf inspect`), and its key refuses a second one.
const SCHEDULES: &str = r#"
    CREATE TABLE schedules (
        workflow         TEXT NOT NULL,
        idx              INTEGER NOT NULL,      -- position in on.schedule
        spec             TEXT NOT NULL,         -- cron expression, or `every 30s`
        timezone         TEXT,                  -- IANA zone of a cron expression
        overlap          TEXT NOT NULL,         -- skip, allow, buffer_one, cancel_previous
        catchup_ms       INTEGER NOT NULL,
        inputs           TEXT NOT NULL,         -- JSON object, resolved
        state            TEXT NOT NULL,         -- JSON object: the initial state of its instances
        definition_hash  TEXT NOT NULL REFERENCES definitions(hash),
        workflow_path    TEXT NOT NULL,
        base_dir         TEXT NOT NULL,
        next_fire_ms     INTEGER NOT NULL,      -- unix ms: the next fire time not yet taken
        buffered_ms      INTEGER,               -- buffer_one: a fire time waiting for the previous instance
        last_instance    TEXT,
        last_fire_ms     INTEGER,
        skipped          INTEGER NOT NULL DEFAULT 0,
        registered_at    TEXT NOT NULL,
        PRIMARY KEY (workflow, idx)
    ) WITHOUT ROWID;
    CREATE TABLE schedule_fires (
        workflow     TEXT NOT NULL,
        idx          INTEGER NOT NULL,
        fire_ms      INTEGER NOT NULL,
        instance_id  TEXT NOT NULL,
        spec         TEXT NOT NULL,
        timezone     TEXT,
        PRIMARY KEY (workflow, idx, fire_ms)
    ) WITHOUT ROWID;
    CREATE INDEX schedule_fires_by_instance ON schedule_fires(instance_id);
    "#;

// 10: `wf list --status S` / `--workflow W` read the newest matching
// instances straight off an index. Before, they walked `instances_by_created`
// from the newest row and looked each one up until LIMIT matched: a status
// or workflow with no rows read every instance (22 ms at 100,000, growing
// with the history; bench/scale.py).
const LIST_INDEXES: &str = r#"
    CREATE INDEX instances_by_status_created ON instances(status, created_at);
    CREATE INDEX instances_by_workflow_created ON instances(workflow, created_at);
    "#;

/// The schema [`MIGRATIONS`] make, as scripts run in one transaction: what
/// a new database is created with. Applying every migration in turn re-reads
/// the schema at each `ALTER TABLE` (2.8 ms for a new database here, against
/// 1.3 ms for this; a first `wf run` of a 1-step workflow took 9.3 ms). The
/// objects, their columns (in the order the `ALTER`s appended them) and their
/// creation order are those of the migrated schema; the test
/// `current_is_what_the_migrations_make` compares the two. The migrations
/// that only create are shared.
pub const CURRENT: &[&str] = &[
    CORE,
    SCHEDULES,
    LIST_INDEXES,
    PARENT_INDEX,
    QUEUES,
    REGISTRY,
    METRICS,
    ACCESS,
    FINDING,
    STEP_CACHE,
];

/// What the migrations other than 8, 10 and 12 left: every table but the
/// schedules', with the columns later migrations added.
const CORE: &str = r#"
    -- Pinned workflow definitions, shared by the instances started from the
    -- same text. Kept out of `instances` so that the rows updated on every step
    -- stay small.
    CREATE TABLE definitions (
        hash      TEXT PRIMARY KEY,         -- sha256 of source, hex
        source    TEXT NOT NULL,
        step_ids  TEXT NOT NULL,            -- JSON list of step ids in file order (for listings)
        compiled  TEXT,                     -- the validated form (JSON), a cache of `source`
        children  TEXT                      -- JSON object: path as written -> hash of the workflow it calls
    ) WITHOUT ROWID;

    CREATE TABLE instances (
        id               TEXT PRIMARY KEY,
        workflow         TEXT NOT NULL,
        status           TEXT NOT NULL,
        definition_hash  TEXT NOT NULL REFERENCES definitions(hash),
        workflow_path    TEXT NOT NULL,     -- the file the instance was started from
        base_dir         TEXT NOT NULL,     -- folder `dir:` and relative commands resolve against
        inputs           TEXT NOT NULL,     -- JSON object
        state            TEXT NOT NULL,     -- JSON object, committed state
        error            TEXT,              -- why the instance failed, if it did
        wake_at          TEXT,              -- sleeping: when the next timer is due
        waiting_event    TEXT,              -- waiting: the event name awaited
        lease_owner      TEXT,              -- process holding the instance
        lease_expires_ms INTEGER,           -- unix ms; a lease past this is dead
        created_at       TEXT NOT NULL,
        updated_at       TEXT NOT NULL,
        cancel_requested INTEGER NOT NULL DEFAULT 0,
        lease_epoch      INTEGER NOT NULL DEFAULT 0,  -- the fencing token
        outputs          TEXT,              -- JSON object, set when the instance completes
        parent_id        TEXT,              -- the parent instance, for a child
        parent_key       TEXT,              -- the parent's unit key (step or item)
        parent_attempt   INTEGER,
        depth            INTEGER NOT NULL DEFAULT 0,  -- parents above it
        labels           TEXT,              -- JSON object: label -> value
        queue_key        TEXT,              -- `queue.key` rendered; NULL: no queue
        queue_priority   INTEGER NOT NULL DEFAULT 5,
        queue_limits     TEXT,              -- JSON: store::queue::QueueLimits
        queue_hold       INTEGER NOT NULL DEFAULT 0,  -- keeps its slot while suspended
        admitted         INTEGER NOT NULL DEFAULT 0,  -- holds a slot of its key
        started_by       TEXT               -- the actor of its `start` action
    );
    CREATE INDEX instances_by_created ON instances(created_at);
    CREATE INDEX instances_by_status ON instances(status, wake_at);

    CREATE TABLE runs (
        instance_id     TEXT NOT NULL REFERENCES instances(id),
        number          INTEGER NOT NULL,
        outcome         TEXT,               -- NULL while the run is in progress
        started_at      TEXT NOT NULL,
        finished_at     TEXT,
        trace_id        TEXT,
        span_id         TEXT,
        parent_span_id  TEXT,
        started_ns      INTEGER,
        restart_from    TEXT,               -- `wf restart --from STEP`: STEP
        definition_hash TEXT,               -- the definition it ran (`wf upgrade` changes it between runs)
        PRIMARY KEY (instance_id, number)
    ) WITHOUT ROWID;

    CREATE TABLE steps (
        instance_id    TEXT NOT NULL REFERENCES instances(id),
        key            TEXT NOT NULL,        -- step id, or id[n] for a for_each item
        step_id        TEXT NOT NULL,
        status         TEXT NOT NULL,        -- running, completed, failed, skipped, sleeping, waiting, pending
        attempts       INTEGER NOT NULL DEFAULT 0,
        budget_base    INTEGER NOT NULL DEFAULT 0, -- attempts at or below this don't count (--retry-failed)
        outcome        TEXT,                 -- outcome of the last attempt
        error_type     TEXT,
        error_message  TEXT,
        output         TEXT,                 -- JSON, set on success only
        started_at     TEXT,
        finished_at    TEXT,
        retry_at       TEXT,                 -- when the next attempt or timer is due
        seq            INTEGER,              -- completion order (for compensation)
        items          TEXT,                 -- JSON list a for_each step fans out over
        state_patch    TEXT,                 -- JSON merge patch committed with the step's success
        PRIMARY KEY (instance_id, key)
    ) WITHOUT ROWID;

    CREATE TABLE attempts (
        instance_id    TEXT NOT NULL REFERENCES instances(id),
        step_key       TEXT NOT NULL,
        attempt        INTEGER NOT NULL,
        run            INTEGER NOT NULL,
        outcome        TEXT,                 -- NULL while in flight; crashed if the process died
        error_type     TEXT,
        error_message  TEXT,
        exit_code      INTEGER,
        started_at     TEXT NOT NULL,
        finished_at    TEXT,
        stdout         BLOB,
        stderr         BLOB,
        span_id        TEXT,
        started_ns     INTEGER,
        proc_host      TEXT,                 -- hostname/boot id of the runner's machine
        proc_pgid      INTEGER,              -- the step's process group (= its leader's pid)
        proc_start     INTEGER,              -- the leader's start time, clock ticks after boot
        cached_from    TEXT,                 -- `cached`: INSTANCE#ATTEMPT it took its result from
        PRIMARY KEY (instance_id, step_key, attempt)
    ) WITHOUT ROWID;

    CREATE TABLE events (
        id           INTEGER PRIMARY KEY,
        instance_id  TEXT NOT NULL REFERENCES instances(id),
        name         TEXT NOT NULL,
        payload      TEXT NOT NULL,          -- JSON
        traceparent  TEXT,
        received_at  TEXT NOT NULL,
        consumed_by  TEXT                    -- step key that took it
    );
    CREATE INDEX events_by_instance ON events(instance_id, name, consumed_by);

    -- A rowid table: spans are appended in the order they end, which keeps
    -- inserts at the end of the b-tree.
    CREATE TABLE spans (
        trace_id        TEXT NOT NULL,          -- 32 hex
        span_id         TEXT NOT NULL,          -- 16 hex
        parent_span_id  TEXT,
        instance_id     TEXT NOT NULL REFERENCES instances(id),
        run             INTEGER NOT NULL,
        name            TEXT NOT NULL,
        kind            TEXT NOT NULL DEFAULT 'internal',   -- internal, client
        start_ns        INTEGER NOT NULL,       -- unix nanoseconds
        end_ns          INTEGER NOT NULL,
        status          TEXT NOT NULL DEFAULT 'unset',      -- unset, ok, error
        status_message  TEXT,
        attributes      TEXT NOT NULL DEFAULT '{}',         -- JSON object
        links           TEXT NOT NULL DEFAULT '[]',         -- JSON [{trace_id, span_id, attributes}]
        exported        INTEGER NOT NULL DEFAULT 0          -- sent to the live OTLP endpoint
    );
    CREATE INDEX spans_by_instance ON spans(instance_id, run, start_ns);
"#;

#[cfg(test)]
#[path = "schema_tests.rs"]
mod tests;
