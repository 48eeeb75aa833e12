-- 0004: the index of what waits (cachestore.WaitingIndex). One row per
-- approval, written, rewritten (claimed) and deleted in the approval's own
-- transactions; entry is cachestore's index entry (EncodeWaiting), asked
-- the time it was asked in Unix nanoseconds. Listings read this table in
-- the order (asked, session, call_id), never approvals or turns. The
-- approvals kept before this migration get their rows when a store opens
-- (Store.reconcileWaiting), which also recounts waiting_count.
CREATE TABLE waiting (
    session bytea   NOT NULL,
    call_id bytea   NOT NULL,
    asked   bigint  NOT NULL,
    run     bytea   NOT NULL,
    tool    bytea   NOT NULL,
    claimed boolean NOT NULL DEFAULT false,
    entry   bytea   NOT NULL,
    PRIMARY KEY (session, call_id)
);
CREATE INDEX waiting_order ON waiting (asked, session, call_id);
CREATE INDEX waiting_session_order ON waiting (session, asked, call_id);

-- How many rows waiting holds: its one row is locked by every commit that
-- adds approvals and every settlement, so the cap a commit carries
-- (TurnCommit.MaxWaiting) holds across the members sharing the store.
CREATE TABLE waiting_count (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    n   bigint  NOT NULL
);
INSERT INTO waiting_count (one, n) VALUES (true, 0);
