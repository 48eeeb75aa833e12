-- 0002: deferred approvals. One row per call committed awaiting_approval,
-- written with its turn and deleted with the answer's amendment; record is
-- cachestore's approval record (claimed: an approving answer took it).
CREATE TABLE approvals (
    session bytea NOT NULL,
    call_id bytea NOT NULL,
    record  bytea NOT NULL,
    PRIMARY KEY (session, call_id)
);
