-- 0003: the session's event counter (cachestore.SessionState.EventBlock),
-- NULL in sessions written before it.
ALTER TABLE sessions ADD COLUMN event_block bigint;
