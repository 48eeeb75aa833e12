package seam

import (
	"context"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
)

// Kind names a store operation: one per method of cachestore.Store.
type Kind uint8

// The operations. Reads first, then writes (Kind.Write).
const (
	LoadSession Kind = iota
	TurnByID
	LoadRun
	Turns
	Sessions
	Approvals
	CacheGet
	KVGet
	KVList
	FileVersions
	FileVersionContent
	ListWaiting
	TurnByNumber
	WriteIntent // the first write
	CommitTurn
	Amend
	ClaimApproval
	SettleApproval
	EndRun
	CachePut
	KVPut
	KVCreate
	KVDelete
	SaveFileVersion
	RecoverAll
	numKinds
)

const firstWrite = WriteIntent

var kindNames = [numKinds]string{
	LoadSession: "load_session", TurnByID: "turn_by_id", LoadRun: "load_run", Turns: "turns", Sessions: "sessions",
	Approvals: "approvals", CacheGet: "cache_get", KVGet: "kv_get", KVList: "kv_list", FileVersions: "file_versions",
	FileVersionContent: "file_version_content", ListWaiting: "list_waiting", TurnByNumber: "turn_by_number",
	WriteIntent: "intent", CommitTurn: "commit", Amend: "amend",
	ClaimApproval: "claim_approval", SettleApproval: "settle_approval", EndRun: "end_run", CachePut: "cache_put",
	KVPut: "kv_put", KVCreate: "kv_create", KVDelete: "kv_delete", SaveFileVersion: "file_version", RecoverAll: "recover",
}

// String is the operation's name ("commit", "intent", "cache_put", …).
func (k Kind) String() string {
	if k < numKinds && kindNames[k] != "" {
		return kindNames[k]
	}
	return "unknown"
}

// Write reports whether the operation may write (LoadSession writes too
// when it resolves an intent left by a crash, and is a read here).
func (k Kind) Write() bool { return k >= firstWrite && k < numKinds }

// Kinds returns every operation, reads first.
func Kinds() []Kind {
	out := make([]Kind, 0, numKinds)
	for k := Kind(0); k < numKinds; k++ {
		if kindNames[k] != "" {
			out = append(out, k)
		}
	}
	return out
}

// ParseKind is the Kind named s, false when none is.
func ParseKind(s string) (Kind, bool) {
	for _, k := range Kinds() {
		if k.String() == s {
			return k, true
		}
	}
	return 0, false
}

// Op describes one store operation.
type Op struct {
	Kind Kind
	// Session, Run and Turn name what the operation is about, where it is
	// about a session (empty and 0 otherwise).
	Session string
	Run     string
	Turn    int64
	// Key tells apart operations about one session and turn, or names
	// what an operation about none is about: the ids of the calls an
	// intent records as started (comma-separated, in call order), the
	// call id of an amendment or an approval, the cache key,
	// "namespace/key" of a KV record, or "workspace/path" of a file
	// version.
	Key string
	// Bytes estimates what a write adds to the store: the size of the
	// records it carries (0 for reads and deletions). A write that
	// rewrites a record it does not carry (an amendment rewrites its turn)
	// counts only what it carries.
	Bytes int64
}

// Hook stands between the caller and the store. Both methods are called
// on the caller's goroutine and must be safe for concurrent use.
type Hook interface {
	// Before is called before op runs; a non-nil error is returned to the
	// caller instead, and the store is not called.
	Before(ctx context.Context, op *Op) error
	// After is called once op has run with the error the store returned;
	// what it returns is what the caller gets (a hook that changes nothing
	// returns err).
	After(ctx context.Context, op *Op, err error) error
}

// Store is a cachestore.Store whose operations pass through a Hook. It is
// safe for concurrent use when the wrapped store and the hook are.
type Store struct {
	inner cachestore.Store // immutable
	hook  Hook             // immutable
}

var (
	_ cachestore.Store     = (*Store)(nil)
	_ cachestore.KVCreator = (*Store)(nil)
)

// Wrap returns s with every operation passed through h.
func Wrap(s cachestore.Store, h Hook) *Store { return &Store{inner: s, hook: h} }

// Inner is the wrapped store.
func (s *Store) Inner() cachestore.Store { return s.inner }

// do runs one operation that returns only an error.
func (s *Store) do(ctx context.Context, op *Op, f func() error) error {
	if err := s.hook.Before(ctx, op); err != nil {
		return err
	}
	return s.hook.After(ctx, op, f())
}

// LoadSession implements cachestore.SessionStore.
func (s *Store) LoadSession(ctx context.Context, session string) (st cachestore.SessionState, err error) {
	err = s.do(ctx, &Op{Kind: LoadSession, Session: session}, func() (e error) {
		st, e = s.inner.LoadSession(ctx, session)
		return e
	})
	if err != nil {
		return cachestore.SessionState{}, err
	}
	return st, nil
}

// TurnByID implements cachestore.SessionStore.
func (s *Store) TurnByID(ctx context.Context, session, turnID string) (rec *messages.TurnRecord, err error) {
	err = s.do(ctx, &Op{Kind: TurnByID, Session: session, Key: turnID}, func() (e error) {
		rec, e = s.inner.TurnByID(ctx, session, turnID)
		return e
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// LoadRun implements cachestore.SessionStore.
func (s *Store) LoadRun(ctx context.Context, session, run string) (rs *cachestore.RunState, err error) {
	err = s.do(ctx, &Op{Kind: LoadRun, Session: session, Run: run}, func() (e error) {
		rs, e = s.inner.LoadRun(ctx, session, run)
		return e
	})
	if err != nil {
		return nil, err
	}
	return rs, nil
}

// EndRun implements cachestore.SessionStore.
func (s *Store) EndRun(ctx context.Context, session, run string) error {
	return s.do(ctx, &Op{Kind: EndRun, Session: session, Run: run}, func() error {
		return s.inner.EndRun(ctx, session, run)
	})
}

// WriteIntent implements cachestore.SessionStore.
func (s *Store) WriteIntent(ctx context.Context, in *cachestore.Intent) error {
	op := &Op{Kind: WriteIntent, Session: in.Session, Run: in.Run, Turn: in.Turn, Key: startedIDs(in), Bytes: IntentBytes(in)}
	return s.do(ctx, op, func() error { return s.inner.WriteIntent(ctx, in) })
}

// startedIDs are the ids of the calls in records as started, in call
// order, comma-separated.
func startedIDs(in *cachestore.Intent) string {
	idx := slices.Clone(in.Started)
	slices.Sort(idx)
	var b strings.Builder
	for _, i := range slices.Compact(idx) {
		if i < 0 || i >= len(in.IDs) {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(in.IDs[i])
	}
	return b.String()
}

// CommitTurn implements cachestore.SessionStore.
func (s *Store) CommitTurn(ctx context.Context, c *cachestore.TurnCommit) error {
	op := &Op{Kind: CommitTurn, Session: c.Session, Run: c.Record.GetRun(), Turn: c.Record.GetTurn(), Bytes: CommitBytes(c)}
	return s.do(ctx, op, func() error { return s.inner.CommitTurn(ctx, c) })
}

// AmendToolMessage implements cachestore.SessionStore.
func (s *Store) AmendToolMessage(ctx context.Context, session, callID string, pending []string, m *messages.ToolMessage) (rec *messages.TurnRecord, err error) {
	op := &Op{Kind: Amend, Session: session, Key: callID, Bytes: int64(proto.Size(m))}
	err = s.do(ctx, op, func() (e error) {
		rec, e = s.inner.AmendToolMessage(ctx, session, callID, pending, m)
		return e
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// Approvals implements cachestore.ApprovalStore and cachestore.History.
func (s *Store) Approvals(ctx context.Context, session string) (out []*cachestore.Approval, err error) {
	err = s.do(ctx, &Op{Kind: Approvals, Session: session}, func() (e error) {
		out, e = s.inner.Approvals(ctx, session)
		return e
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ClaimApproval implements cachestore.ApprovalStore.
func (s *Store) ClaimApproval(ctx context.Context, session, callID, argsHash string) (a *cachestore.Approval, err error) {
	op := &Op{Kind: ClaimApproval, Session: session, Key: callID, Bytes: approvalClaimBytes}
	err = s.do(ctx, op, func() (e error) {
		a, e = s.inner.ClaimApproval(ctx, session, callID, argsHash)
		return e
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// SettleApproval implements cachestore.ApprovalStore.
func (s *Store) SettleApproval(ctx context.Context, session, callID string, m *messages.ToolMessage) (rec *messages.TurnRecord, err error) {
	op := &Op{Kind: SettleApproval, Session: session, Key: callID, Bytes: int64(proto.Size(m))}
	err = s.do(ctx, op, func() (e error) {
		rec, e = s.inner.SettleApproval(ctx, session, callID, m)
		return e
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// ListWaiting implements cachestore.WaitingIndex.
func (s *Store) ListWaiting(ctx context.Context, q cachestore.WaitingQuery) (out cachestore.WaitingPage, err error) {
	err = s.do(ctx, &Op{Kind: ListWaiting, Session: q.Session, Run: q.Run}, func() (e error) {
		out, e = s.inner.ListWaiting(ctx, q)
		return e
	})
	if err != nil {
		return cachestore.WaitingPage{}, err
	}
	return out, nil
}

// TurnByNumber implements cachestore.History.
func (s *Store) TurnByNumber(ctx context.Context, session string, turn int64) (rec *messages.TurnRecord, err error) {
	err = s.do(ctx, &Op{Kind: TurnByNumber, Session: session, Turn: turn}, func() (e error) {
		rec, e = s.inner.TurnByNumber(ctx, session, turn)
		return e
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// Turns implements cachestore.History.
func (s *Store) Turns(ctx context.Context, session string) (out []*messages.TurnRecord, err error) {
	err = s.do(ctx, &Op{Kind: Turns, Session: session}, func() (e error) {
		out, e = s.inner.Turns(ctx, session)
		return e
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Sessions implements cachestore.History.
func (s *Store) Sessions(ctx context.Context) (out []string, err error) {
	err = s.do(ctx, &Op{Kind: Sessions}, func() (e error) {
		out, e = s.inner.Sessions(ctx)
		return e
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CacheGet implements cachestore.CacheStore.
func (s *Store) CacheGet(ctx context.Context, key string, now time.Time) (v []byte, ok bool, err error) {
	err = s.do(ctx, &Op{Kind: CacheGet, Key: key}, func() (e error) {
		v, ok, e = s.inner.CacheGet(ctx, key, now)
		return e
	})
	if err != nil {
		return nil, false, err
	}
	return v, ok, nil
}

// CachePut implements cachestore.CacheStore.
func (s *Store) CachePut(ctx context.Context, e cachestore.CacheEntry) error {
	op := &Op{Kind: CachePut, Key: e.Key, Bytes: int64(len(e.Key) + len(e.Value))}
	return s.do(ctx, op, func() error { return s.inner.CachePut(ctx, e) })
}

// KVGet implements cachestore.KVStore.
func (s *Store) KVGet(ctx context.Context, ns, key string) (v []byte, err error) {
	err = s.do(ctx, &Op{Kind: KVGet, Key: ns + "/" + key}, func() (e error) {
		v, e = s.inner.KVGet(ctx, ns, key)
		return e
	})
	if err != nil {
		return nil, err
	}
	return v, nil
}

// KVPut implements cachestore.KVStore.
func (s *Store) KVPut(ctx context.Context, ns, key string, value []byte) error {
	op := &Op{Kind: KVPut, Key: ns + "/" + key, Bytes: int64(len(ns) + len(key) + len(value))}
	return s.do(ctx, op, func() error { return s.inner.KVPut(ctx, ns, key, value) })
}

// KVDelete implements cachestore.KVStore.
func (s *Store) KVDelete(ctx context.Context, ns, key string) error {
	return s.do(ctx, &Op{Kind: KVDelete, Key: ns + "/" + key}, func() error { return s.inner.KVDelete(ctx, ns, key) })
}

// KVList implements cachestore.KVStore.
func (s *Store) KVList(ctx context.Context, ns, keyPrefix string) (out []cachestore.KV, err error) {
	err = s.do(ctx, &Op{Kind: KVList, Key: ns + "/" + keyPrefix}, func() (e error) {
		out, e = s.inner.KVList(ctx, ns, keyPrefix)
		return e
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// KVCreate implements cachestore.KVCreator on a store that does
// (cachestore.ErrNoKVCreate otherwise).
func (s *Store) KVCreate(ctx context.Context, ns, key string, value []byte) (stored []byte, created bool, err error) {
	c, ok := s.inner.(cachestore.KVCreator)
	if !ok {
		return nil, false, cachestore.ErrNoKVCreate
	}
	op := &Op{Kind: KVCreate, Key: ns + "/" + key, Bytes: int64(len(ns) + len(key) + len(value))}
	err = s.do(ctx, op, func() (e error) {
		stored, created, e = c.KVCreate(ctx, ns, key, value)
		return e
	})
	if err != nil {
		return nil, false, err
	}
	return stored, created, nil
}

// SaveFileVersion implements cachestore.VersionStore.
func (s *Store) SaveFileVersion(ctx context.Context, workspace, path string, content []byte, deleted bool, note string) (v int64, err error) {
	op := &Op{Kind: SaveFileVersion, Key: workspace + "/" + path, Bytes: int64(len(workspace) + len(path) + len(content) + len(note))}
	err = s.do(ctx, op, func() (e error) {
		v, e = s.inner.SaveFileVersion(ctx, workspace, path, content, deleted, note)
		return e
	})
	if err != nil {
		return 0, err
	}
	return v, nil
}

// FileVersions implements cachestore.VersionStore.
func (s *Store) FileVersions(ctx context.Context, workspace, path string) (out []cachestore.FileVersion, err error) {
	err = s.do(ctx, &Op{Kind: FileVersions, Key: workspace + "/" + path}, func() (e error) {
		out, e = s.inner.FileVersions(ctx, workspace, path)
		return e
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// FileVersionContent implements cachestore.VersionStore.
func (s *Store) FileVersionContent(ctx context.Context, workspace, path string, version int64) (b []byte, fv cachestore.FileVersion, err error) {
	err = s.do(ctx, &Op{Kind: FileVersionContent, Key: workspace + "/" + path}, func() (e error) {
		b, fv, e = s.inner.FileVersionContent(ctx, workspace, path, version)
		return e
	})
	if err != nil {
		return nil, cachestore.FileVersion{}, err
	}
	return b, fv, nil
}

// RecoverAll implements cachestore.Lifecycle.
func (s *Store) RecoverAll(ctx context.Context) (n int, err error) {
	err = s.do(ctx, &Op{Kind: RecoverAll}, func() (e error) {
		n, e = s.inner.RecoverAll(ctx)
		return e
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// Close closes the wrapped store; it is not passed through the hook.
func (s *Store) Close() error { return s.inner.Close() }
