package cachestore

import (
	"errors"
	"io/fs"

	"github.com/tooldispatch/tooldispatch/cachestore/internal/wire"
)

// Sentinel errors of every store (Badger, Memory, PostgreSQL); callers
// match them with errors.Is.
var (
	// ErrNotFound: the key, turn or version does not exist. It also
	// matches fs.ErrNotExist (errors.Is), which is how packages that see a
	// store through a small interface of their own (toolkit/secrets,
	// toolkit/memory, toolkit/builtin) recognise it without importing
	// cachestore.
	ErrNotFound error = notFound{}
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("cachestore: closed")
	// ErrStaleTurn: a commit or intent names a turn number that is not the
	// session's next turn (a second writer, or a replayed commit).
	ErrStaleTurn = errors.New("cachestore: stale turn")
	// ErrAlreadySettled: AmendToolMessage found the call no longer pending.
	ErrAlreadySettled = errors.New("cachestore: call already settled")
	// ErrFenced: a write (WriteIntent, CommitTurn, AmendToolMessage) was
	// refused because another writer took the session over since this one
	// loaded it.
	//
	// Stores shared by several processes (PostgreSQL) fence writers: every
	// LoadSession takes the session over by incrementing its epoch in the
	// store, in the transaction that resolves a leftover intent, and the
	// process keeps the epoch it got. A write checks, in its own transaction
	// and under the session row's lock, that the stored epoch is still the
	// one the process holds; when a LoadSession elsewhere (a session grain
	// re-activated on another member after a partition) bumped it, the write
	// fails with ErrFenced and changes nothing. The fenced writer must stop
	// writing the session: its state is stale. Loading the session again
	// takes it back (and fences the other writer in turn). Single-process
	// stores (Badger, Memory) never return it.
	ErrFenced = errors.New("cachestore: session taken over by another writer")
	// ErrTooLarge: a write does not fit in the store (a value or a
	// transaction beyond its limits). Its message gives sizes, never the
	// bytes.
	ErrTooLarge = errors.New("cachestore: too large for the store")
	// ErrCorrupt: a stored record does not decode.
	ErrCorrupt = wire.ErrCorrupt
	// ErrNoKVCreate: the store under a Split does not implement KVCreator.
	ErrNoKVCreate = errors.New("cachestore: the store cannot create records atomically")
	// ErrNoSpace: a write was refused, before anything of it was written,
	// because the store's disk is below its free-space reserve
	// (cachestore/space); a *NoSpaceError says which folder, how much is
	// free and how much is kept. Reads still work, and writes are taken
	// again once space is freed.
	ErrNoSpace = errors.New("cachestore: no space for the store")
)

type notFound struct{}

func (notFound) Error() string        { return "cachestore: not found" }
func (notFound) Is(target error) bool { return target == fs.ErrNotExist }
