// Package badger is the embedded cachestore.Store, on
// github.com/dgraph-io/badger/v4: Open(Options) returns a *Store that keeps
// everything in one data directory, or in memory; TestOptions(dir) are the
// options of a small store that opens in milliseconds, for tests. A
// directory can be open in one process at a time.
//
// The package knows the store interfaces and records of package cachestore
// and nothing of actors, tools or clusters.
//
// # Key layout
//
// Every key starts with the layout version "v1/". Caller-chosen strings
// (session, run and turn ids, tool names, de-duplication and cache keys,
// file paths) appear in keys as lowercase hex, so they never contain '/' and
// no id can reach into another's keys; hex also keeps byte order. Numbers
// are zero-padded decimal, 16 digits, so byte order is numeric order.
//
//	v1/s/{session}/meta           session meta: 1 next_turn
//	v1/s/{session}/ev             event counter: 1 block (cachestore.SessionState.EventBlock;
//	                              absent in sessions written before it)
//	v1/s/{session}/t/{turn}       committed turn: messages.TurnRecord (protobuf)
//	v1/s/{session}/id/{turn id}   turn-id index: 1 turn
//	v1/r/{session}/{run}/d/{key}  de-duplication entry: 1 key, 2 tool, 3 content,
//	                              4 paths (repeated), 5 stale_on_mutation, 6 stamp,
//	                              7 scope
//	v1/r/{session}/{run}/f/{tool} schema fetched in the run (empty value)
//	v1/i/{session}/{turn}         intent record: 1 session, 2 turn, 3 run, 4 turn_id,
//	                              5 provider, 6 assistant (messages.AssistantMessage),
//	                              7 decided (repeated {1 index, 2 messages.ToolMessage}),
//	                              8 started (repeated index), 9 names, 10 ids (repeated),
//	                              11 calls_hash, 12 tasks (repeated {1 index, 2 task id,
//	                              3 learned at, unix ns})
//	v1/a/{session}/{call id}      deferred approval: cachestore.Approval as JSON
//	                              (EncodeApproval)
//	v1/w/{asked}/{session}/{call id}  its entry of the index of what waits: 1 run,
//	                              2 tool, 3 claimed, 4 cachestore.Waiting as JSON
//	                              (EncodeWaiting); {asked} in Unix nanoseconds, 19 digits
//	v1/ws/{session}/{asked}/{call id} the same entry by session (empty value)
//	v1/wi                         the index of what waits is built: 1 layout (1)
//	v1/c/{key}                    cache entry: 1 expires (unix ns; absent: never), 2 value
//	v1/fv/{workspace}/{path}/{n}  file version n: 1 version, 2 time (unix ns), 3 size,
//	                              4 deleted, 5 note
//	v1/fc/{workspace}/{path}/{n}  file version n's bytes (raw)
//	v1/kv/{ns}/{key}              record of another package (raw bytes)
//	v1/p/{key}/{n}                part n of a chunked turn or intent record
//	                              stored under {key} (see chunk.go)
//
// {workspace} is the hex of the first 16 bytes of the SHA-256 of the
// workspace's cleaned absolute path. Records other than TurnRecord use the
// protobuf wire format written field by field (the numbers above): readers
// skip unknown fields and read missing ones as zero; a field number is never
// reused. A new layout gets a new version prefix.
//
// Cache entries carry their absolute expiry and are checked on read against
// the caller's clock; Badger's own TTL (expiry plus a minute, whole seconds)
// only reclaims space, so the caller's clock is expected to be near the wall
// clock.
//
// # Writes
//
// Badger funnels every write through one committer goroutine: it takes the
// queued writes of all sessions, checks each turn number on its own (a stale
// one fails alone) and writes the rest in one transaction, so concurrent
// sessions share one fsync. A commit is one transaction; when the whole is
// too big for one, its cache entries, new de-duplication entries and
// fetched marks go in later ones and the entries it deletes in earlier ones
// (the turn record, meta, turn-id index and intent deletion always go
// together). Size errors are ErrTooLarge, with sizes and never bytes.
package badger
