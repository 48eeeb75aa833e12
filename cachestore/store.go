package cachestore

import (
	"context"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/tooldispatch/tooldispatch/messages"
)

// SessionState is what a session actor loads when it starts.
type SessionState struct {
	// NextTurn is the number the next turn of the session gets (first is 1).
	NextTurn int64
	// EventBlock is the session's event counter as it was when loaded:
	// the dispatcher numbers events in blocks (block b holds the numbers
	// from b×10⁹+1), and no writer of the session used a block at or above
	// it. LoadSession takes two blocks for its caller, EventBlock and the
	// next, by storing EventBlock+2 before it returns, so a loader may emit
	// in them before it writes anything. A session stored before the
	// counter existed reads as LoadedEventBlock derives it.
	EventBlock uint64
}

// EventBlocksPerLoad is how many blocks LoadSession takes for its caller.
const EventBlocksPerLoad = 2

// LoadedEventBlock is the event counter LoadSession returns: the stored
// one (ok), or for a session stored without one, a block past every
// number the older numbering gave (turn t's events in block t, events
// between turns in the block of the last committed turn, a turn that was
// interrupted before it was written in the block of the next turn): 0 for
// a session with no committed turn, next+1 otherwise.
func LoadedEventBlock(stored uint64, ok bool, next int64) uint64 {
	switch {
	case ok:
		return stored
	case next <= 1:
		return 0
	}
	return uint64(next) + 1
}

// DedupEntry is one row of a run's de-duplication table: a call that
// succeeded, by tool name and canonical arguments.
type DedupEntry struct {
	Key     string // hex sha256 of tool name, "|", canonical arguments
	Tool    string
	Content string
	// Paths the call read or wrote, cleaned and workspace-relative.
	Paths []string
	// StaleOnMutation: any successful mutating call drops this entry.
	StaleOnMutation bool
	// Scope is the de-duplication scope of the entry's tool
	// (toolkit.Tool.DedupScope): a successful call of a tool of the same
	// scope that is not read-only drops this entry.
	Scope string
	// Stamp is what the call saw of the world outside the run before it ran
	// (toolkit.Tool.Stamp: for file tools each path's size, modification
	// time and content hash); the entry is replayed only while a fresh stamp
	// is equal.
	Stamp string
}

// RunState is the state of one run: the de-duplication table and the tools
// whose schemas the model has fetched.
type RunState struct {
	Dedup   map[string]*DedupEntry // by Key
	Fetched map[string]bool        // by tool name
}

// Intent is the record written before calls run: the turn as it stands after
// preflight, and which calls may have started. After a crash it is resolved
// into a committed turn: decided calls keep their message, started calls read
// outcome_unknown, the rest canceled. Writing it again for the same turn
// replaces it.
type Intent struct {
	Session   string
	Turn      int64
	Run       string
	TurnID    string
	Provider  string
	Assistant *messages.AssistantMessage
	// Decided maps a call index to its message when pass 1 already decided it
	// (unknown_tool, invalid_args, deduped, skipped, …).
	Decided map[int]*messages.ToolMessage
	// Started lists the indices of calls that may have started.
	Started []int
	// Names and IDs are the normalised tool name and call id of each call, by index.
	Names []string
	IDs   []string
	// CallsHash is the turn record's calls_hash (set when the turn has a
	// turn id), kept so that a resolved turn is an idempotency key too.
	CallsHash string
	// EventBlock, when set, is stored as the session's event counter
	// (SessionState.EventBlock) with the intent; its writer only raises it.
	EventBlock uint64
	// Tasks names the calls that run as tasks of an outside server (MCP
	// tasks), each with the id the server gave its task: the intent is
	// written again, through the session's writer, once a server has
	// answered a call with its task. An intent naming a started call's
	// task is resolved with what a TaskLookup learns of the task.
	Tasks []TaskRef
}

// TaskRef is the task of an outside server that a call of an intent runs
// as.
type TaskRef struct {
	// Index is the call's index in the turn.
	Index int
	// ID is the task's id, as the server gave it.
	ID string
	// At is when the dispatcher learned it.
	At time.Time
}

// TurnCommit is everything one turn writes, applied in one transaction.
type TurnCommit struct {
	Session string
	Record  *messages.TurnRecord
	// Run state changes.
	FetchedAdd []string
	DedupPut   []*DedupEntry
	DedupDel   []string
	// CachePut entries are written to the TTL cache in the same transaction.
	CachePut []CacheEntry
	// Approvals are the deferred approvals of the turn's calls committed
	// awaiting_approval (CheckApprovals), written in the same transaction
	// with their entries of the index of what waits (WaitingOf).
	Approvals []*Approval
	// MaxWaiting, when positive, caps the approvals the store holds
	// waiting, every session's together: a commit whose approvals would
	// take them past it fails whole with a *WaitingCapError and writes
	// nothing (a commit without approvals never does).
	MaxWaiting int64
	// EventBlock, when set, is stored as the session's event counter
	// (SessionState.EventBlock) with the turn; its writer only raises it.
	EventBlock uint64
}

// CacheEntry is one value of the TTL cache with its absolute expiry.
//
// CacheEntry, FileVersion and KV are aliases of unnamed struct types: a
// package that declares the same struct in an interface of its own
// (toolkit.CacheEntry, builtin.VersionInfo, toolkit.KVRecord) is satisfied
// by the stores here without either package importing the other.
type CacheEntry = struct {
	Key     string
	Value   []byte
	Expires time.Time
}

// FileVersion describes one kept version of a workspace file: Deleted
// records a removal, Note names the tool that wrote it ("edit_file").
type FileVersion = struct {
	Version int64
	Time    time.Time
	Size    int64
	Deleted bool
	Note    string
}

// KV is one record of a namespace (an alias, see CacheEntry).
type KV = struct {
	Key   string
	Value []byte
}

// The stores are used through small interfaces, one per kind of user, and
// Store composes them all: the dispatcher's session writers see a
// SessionStore, the service's session views a History, each tool package a
// declaration of its own that CacheStore, KVStore or VersionStore
// satisfies, and the program that opens a store its Lifecycle. Every
// implementation is safe for concurrent use.

// SessionStore is what a session's single writer persists through: the
// dispatcher's commit actor, one per session, so an implementation sees at
// most one writer per session at a time (it must be safe for concurrent
// use across sessions). It loads the session, writes the intent record of
// a turn before its calls run, commits the turn, amends a client call's
// pending message, and keeps the deferred approvals.
type SessionStore interface {
	// LoadSession returns the session's state, first resolving any intent
	// record left by a crash into a committed turn (nobody else can be writing
	// the session when its actor starts), and takes EventBlocksPerLoad
	// blocks of event numbers for its caller (SessionState.EventBlock).
	LoadSession(ctx context.Context, session string) (SessionState, error)
	// TurnByID returns the committed turn with this turn id, or ErrNotFound.
	TurnByID(ctx context.Context, session, turnID string) (*messages.TurnRecord, error)
	// LoadRun returns a run's state (empty, never nil maps, for a new run).
	// A run's state is written only with a committed turn (CommitTurn, or
	// LoadSession resolving an intent), so a session whose NextTurn is 1
	// has none: the dispatcher does not ask for it.
	LoadRun(ctx context.Context, session, run string) (*RunState, error)
	// EndRun deletes a run's state.
	EndRun(ctx context.Context, session, run string) error
	// WriteIntent persists (or replaces) the intent record of a turn. The
	// turn must be the session's next turn (ErrStaleTurn otherwise).
	WriteIntent(ctx context.Context, in *Intent) error
	// CommitTurn writes the turn record, the run-state changes and the cache
	// entries and deletes the turn's intent, atomically. Record.Turn must be
	// the session's next turn (ErrStaleTurn otherwise); afterwards NextTurn is
	// one more.
	CommitTurn(ctx context.Context, c *TurnCommit) error
	// AmendToolMessage replaces the committed tool message of callID in the
	// session when its status is one of pending (a client tool's result
	// handed back), and returns the amended turn; ErrAlreadySettled when the
	// call is no longer pending, ErrNotFound when there is no such call.
	// When later turns repeat the call id (a model chooses call ids), the
	// latest message of that id still pending is the one amended. The
	// stored message is AmendedMessage(committed, m): m without a name keeps
	// the committed message's.
	AmendToolMessage(ctx context.Context, session, callID string, pending []string, m *messages.ToolMessage) (*messages.TurnRecord, error)
	// The deferred approvals: listed, claimed by an approving answer,
	// settled by the answer's result.
	ApprovalStore
}

// History reads committed sessions back (the service's session views, the
// command's session and chaos reports).
type History interface {
	// Turns returns the committed turns of a session in order.
	Turns(ctx context.Context, session string) ([]*messages.TurnRecord, error)
	// Sessions lists the ids of sessions that have committed turns, sorted.
	Sessions(ctx context.Context) ([]string, error)
	// Approvals lists the waiting approvals of a session, or of every
	// session when session is empty (ApprovalStore).
	Approvals(ctx context.Context, session string) ([]*Approval, error)
	// TurnByNumber returns one committed turn of a session, or
	// ErrNotFound, without reading the others.
	TurnByNumber(ctx context.Context, session string, turn int64) (*messages.TurnRecord, error)
	// ListWaiting returns a page of the index of what waits (ApprovalStore).
	ListWaiting(ctx context.Context, q WaitingQuery) (WaitingPage, error)
}

// CacheStore is the TTL cache of tool results (CommitTurn writes a turn's
// entries too).
type CacheStore interface {
	// CacheGet returns the cached value if it exists and now is before its
	// absolute expiry.
	CacheGet(ctx context.Context, key string, now time.Time) ([]byte, bool, error)
	// CachePut stores a value with an absolute expiry.
	CachePut(ctx context.Context, e CacheEntry) error
}

// KVStore keeps small records of other packages (secrets, error memory) by
// namespace.
type KVStore interface {
	// KVGet returns one record, or ErrNotFound.
	KVGet(ctx context.Context, ns, key string) ([]byte, error)
	// KVPut stores one record.
	KVPut(ctx context.Context, ns, key string, value []byte) error
	// KVDelete deletes one record; deleting a missing key is not an error.
	KVDelete(ctx context.Context, ns, key string) error
	// KVList returns the records whose keys start with keyPrefix, in key order.
	KVList(ctx context.Context, ns, keyPrefix string) ([]KV, error)
}

// KVCreator is a store that can write a KV record only while its key is
// free: what processes sharing one store (a cluster's members) need to
// agree on a value (the secrets' key) or to hand out numbers (the error
// memory's records) without overwriting each other. Badger, Memory, Split
// (over a KVCreator) and the PostgreSQL store implement it; it is not part
// of Store, so that stores written elsewhere keep satisfying Store.
type KVCreator interface {
	// KVCreate stores value under key when the key holds nothing, and
	// returns the value the key holds afterwards: value itself with
	// created true, or the earlier value with created false.
	KVCreate(ctx context.Context, ns, key string, value []byte) (stored []byte, created bool, err error)
}

// VersionStore keeps versions of workspace files.
type VersionStore interface {
	// SaveFileVersion keeps a version of a workspace file and returns its number.
	SaveFileVersion(ctx context.Context, workspace, path string, content []byte, deleted bool, note string) (int64, error)
	// FileVersions lists a file's versions, oldest first.
	FileVersions(ctx context.Context, workspace, path string) ([]FileVersion, error)
	// FileVersionContent returns one version's bytes, or ErrNotFound.
	FileVersionContent(ctx context.Context, workspace, path string, version int64) ([]byte, FileVersion, error)
}

// Lifecycle is what the program that opens a store calls besides using it.
type Lifecycle interface {
	// RecoverAll resolves every intent record in the store (run when the
	// data directory is opened) and returns how many turns it resolved.
	RecoverAll(ctx context.Context) (int, error)
	// Close releases the store; every other method returns ErrClosed
	// afterwards. It is idempotent.
	Close() error
}

// Store is a whole store: what Badger (cachestore/badger), Memory and
// PostgreSQL (cachestore/postgres) implement, and what cachestore/storetest
// checks.
type Store interface {
	SessionStore
	History
	CacheStore
	KVStore
	VersionStore
	Lifecycle
}

// AmendedMessage is the message an amendment stores in place of committed:
// a copy of m, named as committed when m carries no name (a client's result
// names only its call).
func AmendedMessage(committed, m *messages.ToolMessage) *messages.ToolMessage {
	out := proto.Clone(m).(*messages.ToolMessage)
	if out.Name == "" {
		out.Name = committed.GetName()
	}
	return out
}
