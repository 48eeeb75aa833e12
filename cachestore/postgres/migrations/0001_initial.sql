-- 0001: the first PostgreSQL schema of cachestore.
--
-- Every caller-chosen string (session, run and turn ids, keys, namespaces,
-- workspaces, paths) is bytea: ids may hold NUL or invalid UTF-8, which text
-- refuses, and bytea sorts byte by byte like Go strings.

-- One row per session: the next turn number and the fencing epoch. Every
-- LoadSession increments epoch; a write carries the epoch its process took
-- and fails (cachestore.ErrFenced) when the row holds another one.
CREATE TABLE sessions (
    session   bytea  PRIMARY KEY,
    next_turn bigint NOT NULL DEFAULT 1,
    epoch     bigint NOT NULL DEFAULT 0
);

-- Committed turns: record is a messages.TurnRecord (protobuf).
CREATE TABLE turns (
    session bytea  NOT NULL,
    turn    bigint NOT NULL,
    run     bytea  NOT NULL,
    turn_id bytea  NOT NULL,
    record  bytea  NOT NULL,
    PRIMARY KEY (session, turn)
);
-- Turn ids are idempotency keys: a session never holds one twice.
CREATE UNIQUE INDEX turns_session_turn_id ON turns (session, turn_id) WHERE turn_id <> '\x'::bytea;

-- Run state: the de-duplication table (entry: the dedup record of
-- cachestore's codec) and the tools whose schemas were fetched.
CREATE TABLE run_dedup (
    session bytea NOT NULL,
    run     bytea NOT NULL,
    key     bytea NOT NULL,
    entry   bytea NOT NULL,
    PRIMARY KEY (session, run, key)
);
CREATE TABLE run_fetched (
    session bytea NOT NULL,
    run     bytea NOT NULL,
    tool    bytea NOT NULL,
    PRIMARY KEY (session, run, tool)
);

-- Intent records (record: the intent record of cachestore's codec).
CREATE TABLE intents (
    session bytea  NOT NULL,
    turn    bigint NOT NULL,
    record  bytea  NOT NULL,
    PRIMARY KEY (session, turn)
);

-- TTL cache: expires is the absolute expiry in unix nanoseconds, NULL for
-- never; it is checked on read against the caller's clock.
CREATE TABLE cache (
    key     bytea  PRIMARY KEY,
    value   bytea  NOT NULL,
    expires bigint
);
CREATE INDEX cache_expires ON cache (expires) WHERE expires IS NOT NULL;

-- Small records of other packages by namespace.
CREATE TABLE kv (
    ns    bytea NOT NULL,
    key   bytea NOT NULL,
    value bytea NOT NULL,
    PRIMARY KEY (ns, key)
);

-- File versions: file_heads hands out version numbers (1, 2, 3… per file)
-- under its row lock; workspace is the normalised workspace path.
CREATE TABLE file_heads (
    workspace bytea  NOT NULL,
    path      bytea  NOT NULL,
    last      bigint NOT NULL,
    PRIMARY KEY (workspace, path)
);
CREATE TABLE file_versions (
    workspace      bytea   NOT NULL,
    path           bytea   NOT NULL,
    version        bigint  NOT NULL,
    time_unix_nano bigint  NOT NULL,
    size           bigint  NOT NULL,
    deleted        boolean NOT NULL,
    note           bytea   NOT NULL,
    content        bytea   NOT NULL,
    PRIMARY KEY (workspace, path, version)
);
