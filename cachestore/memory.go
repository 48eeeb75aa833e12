package cachestore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/tooldispatch/tooldispatch/messages"
)

// Memory is an in-memory Store with the same semantics as Badger
// (cachestore/badger), for tests,
// benchmarks and as a reference. Everything it stores or returns is a deep
// copy, so callers never share memory with its state. All methods are safe
// for concurrent use; they serialise on one mutex.
type Memory struct {
	now func() time.Time // immutable after NewMemory

	mu       sync.Mutex
	closed   bool                            // guarded by mu
	sessions map[string]*memSession          // guarded by mu
	intents  map[string]map[int64]*Intent    // by session, then turn; guarded by mu
	runs     map[memRunKey]*RunState         // guarded by mu
	cache    map[string]memCacheEntry        // guarded by mu
	files    map[memFileKey][]memFileVersion // guarded by mu
	kv       map[string][]byte               // by namespace NUL key; guarded by mu
	approval map[memApprovalKey]*Approval    // guarded by mu
	waiting  memWaiting                      // the index of what waits; guarded by mu
	events   map[string]uint64               // event counter by session; guarded by mu
	tasks    TaskLookup                      // guarded by mu
}

type memApprovalKey struct{ session, callID string }

type memSession struct {
	next  int64
	turns []*messages.TurnRecord
	ids   map[string]int64
}

type memRunKey struct{ session, run string }

type memCacheEntry struct {
	value     []byte
	expires   int64
	hasExpiry bool
}

type memFileKey struct{ workspace, path string }

type memFileVersion struct {
	v       FileVersion
	content []byte
}

var (
	_ Store        = (*Memory)(nil)
	_ TaskResolver = (*Memory)(nil)
)

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{
		now:      time.Now,
		sessions: make(map[string]*memSession),
		intents:  make(map[string]map[int64]*Intent),
		runs:     make(map[memRunKey]*RunState),
		cache:    make(map[string]memCacheEntry),
		files:    make(map[memFileKey][]memFileVersion),
		approval: make(map[memApprovalKey]*Approval),
		waiting:  newMemWaiting(),
		events:   make(map[string]uint64),
	}
}

// lock starts a call: it checks ctx and that the store is open, and holds
// mu on success.
func (m *Memory) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	return nil
}

func (m *Memory) nextTurn(session string) int64 {
	if s := m.sessions[session]; s != nil {
		return s.next
	}
	return 1
}

// LoadSession returns the session's state, first resolving an intent record
// into a committed turn.
func (m *Memory) LoadSession(ctx context.Context, session string) (SessionState, error) {
	if _, err := m.resolve(ctx, session, true); err != nil {
		return SessionState{}, fmt.Errorf("loading session %q: %w", session, err)
	}
	if err := m.lock(ctx); err != nil {
		return SessionState{}, fmt.Errorf("loading session %q: %w", session, err)
	}
	st := SessionState{NextTurn: m.nextTurn(session)}
	stored, ok := m.events[session]
	st.EventBlock = LoadedEventBlock(stored, ok, st.NextTurn)
	m.events[session] = st.EventBlock + EventBlocksPerLoad
	m.mu.Unlock()
	if _, err := SettleClaimed(ctx, m, session); err != nil {
		return SessionState{}, fmt.Errorf("loading session %q: %w", session, err)
	}
	return st, nil
}

// resolve resolves the session's intent of its next turn and drops any
// other; it reports whether a turn was resolved. An intent naming a
// started call's task is resolved with what the TaskLookup learns, asked
// without the lock; without a lookup it is left in place unless blind.
func (m *Memory) resolve(ctx context.Context, session string, blind bool) (bool, error) {
	if err := m.lock(ctx); err != nil {
		return false, err
	}
	in, lookup := m.intents[session][m.nextTurn(session)], m.tasks
	if len(StartedTasks(in)) == 0 || (lookup == nil && blind) {
		defer m.mu.Unlock()
		return m.resolveLocked(session, nil), nil
	}
	if lookup == nil {
		m.mu.Unlock()
		return false, nil // left for the lookup
	}
	c := cloneIntent(in)
	m.mu.Unlock()
	o := LookUpTasks(ctx, lookup, session, c)
	if err := m.lock(ctx); err != nil {
		return false, err
	}
	defer m.mu.Unlock()
	return m.resolveLocked(session, o), nil
}

// resolveLocked resolves the session's intent of its next turn, with what
// a lookup learned of its tasks, and drops any other; it reports whether a
// turn was resolved.
func (m *Memory) resolveLocked(session string, o *TaskOutcomes) bool {
	byTurn := m.intents[session]
	if len(byTurn) == 0 {
		return false
	}
	delete(m.intents, session)
	in := byTurn[m.nextTurn(session)]
	if in == nil {
		return false
	}
	rec, turnID := privateTurn(ResolveIntentWith(in, m.now(), o))
	m.commitLocked(session, rec, turnID)
	return true
}

// privateTurn prepares a record the store owns: invalid UTF-8 replaced as
// Badger replaces it. It returns the turn id as the caller gave it, which
// is what the index uses, like Badger's.
func privateTurn(rec *messages.TurnRecord) (*messages.TurnRecord, string) {
	turnID := rec.TurnId
	if !turnUTF8Valid(rec) {
		toValidUTF8(rec.ProtoReflect())
	}
	return rec, turnID
}

// commitLocked appends rec (from privateTurn) as the session's next turn.
func (m *Memory) commitLocked(session string, rec *messages.TurnRecord, turnID string) {
	s := m.sessions[session]
	if s == nil {
		s = &memSession{next: 1, ids: make(map[string]int64)}
		m.sessions[session] = s
	}
	s.turns = append(s.turns, rec)
	s.next = rec.Turn + 1
	if turnID != "" {
		s.ids[turnID] = rec.Turn
	}
	if byTurn := m.intents[session]; byTurn != nil {
		delete(byTurn, rec.Turn)
		if len(byTurn) == 0 {
			delete(m.intents, session)
		}
	}
}

// Turns returns copies of the committed turns of a session in order.
func (m *Memory) Turns(ctx context.Context, session string) ([]*messages.TurnRecord, error) {
	if err := m.lock(ctx); err != nil {
		return nil, fmt.Errorf("reading turns of session %q: %w", session, err)
	}
	defer m.mu.Unlock()
	out := []*messages.TurnRecord{}
	if s := m.sessions[session]; s != nil {
		for _, rec := range s.turns {
			out = append(out, cloneTurn(rec))
		}
	}
	return out, nil
}

// TurnByID returns a copy of the committed turn with this turn id, or
// ErrNotFound.
func (m *Memory) TurnByID(ctx context.Context, session, turnID string) (*messages.TurnRecord, error) {
	if err := m.lock(ctx); err != nil {
		return nil, fmt.Errorf("reading turn %q of session %q: %w", turnID, session, err)
	}
	defer m.mu.Unlock()
	s := m.sessions[session]
	if s == nil || turnID == "" {
		return nil, fmt.Errorf("reading turn %q of session %q: %w", turnID, session, ErrNotFound)
	}
	n, ok := s.ids[turnID]
	if !ok {
		return nil, fmt.Errorf("reading turn %q of session %q: %w", turnID, session, ErrNotFound)
	}
	return cloneTurn(s.turns[n-1]), nil
}

// Sessions lists the ids of sessions that have committed turns, sorted.
func (m *Memory) Sessions(ctx context.Context) ([]string, error) {
	if err := m.lock(ctx); err != nil {
		return nil, fmt.Errorf("listing sessions: %w", err)
	}
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.sessions))
	for id := range m.sessions {
		out = append(out, id)
	}
	slices.Sort(out)
	return out, nil
}

// LoadRun returns a copy of a run's state: empty, never nil, maps for a new run.
func (m *Memory) LoadRun(ctx context.Context, session, run string) (*RunState, error) {
	if err := m.lock(ctx); err != nil {
		return nil, fmt.Errorf("loading run %q of session %q: %w", run, session, err)
	}
	defer m.mu.Unlock()
	out := &RunState{Dedup: map[string]*DedupEntry{}, Fetched: map[string]bool{}}
	if rs := m.runs[memRunKey{session, run}]; rs != nil {
		for k, e := range rs.Dedup {
			out.Dedup[k] = cloneDedup(e)
		}
		for k, v := range rs.Fetched {
			out.Fetched[k] = v
		}
	}
	return out, nil
}

// EndRun deletes a run's state.
func (m *Memory) EndRun(ctx context.Context, session, run string) error {
	if err := m.lock(ctx); err != nil {
		return fmt.Errorf("ending run %q of session %q: %w", run, session, err)
	}
	defer m.mu.Unlock()
	delete(m.runs, memRunKey{session, run})
	return nil
}

// WriteIntent stores (or replaces) a copy of the intent record of the
// session's next turn; ErrStaleTurn if in.Turn is not that turn.
func (m *Memory) WriteIntent(ctx context.Context, in *Intent) error {
	if in == nil {
		return errors.New("writing intent: no intent")
	}
	c := cloneIntent(in)
	if err := m.lock(ctx); err != nil {
		return fmt.Errorf("writing intent of turn %d of session %q: %w", in.Turn, in.Session, err)
	}
	defer m.mu.Unlock()
	if next := m.nextTurn(in.Session); in.Turn != next {
		return fmt.Errorf("writing intent of turn %d of session %q: next turn is %d: %w", in.Turn, in.Session, next, ErrStaleTurn)
	}
	byTurn := m.intents[in.Session]
	if byTurn == nil {
		byTurn = make(map[int64]*Intent)
		m.intents[in.Session] = byTurn
	}
	byTurn[in.Turn] = c
	m.countEventsLocked(in.Session, in.EventBlock)
	return nil
}

// countEventsLocked stores block as the session's event counter when it
// is above the stored one.
func (m *Memory) countEventsLocked(session string, block uint64) {
	if block > m.events[session] {
		m.events[session] = block
	}
}

// CommitTurn applies a turn's writes atomically: the record, the run-state
// changes (in field order: a key in both DedupPut and DedupDel ends
// deleted) and the cache entries, bumps the next turn and deletes the
// turn's intent.
func (m *Memory) CommitTurn(ctx context.Context, c *TurnCommit) error {
	if c == nil || c.Record == nil {
		return errors.New("committing turn: no turn record")
	}
	// Copy outside the lock: concurrent sessions only serialise on the map updates.
	rec, turnID := privateTurn(cloneTurn(c.Record))
	dedup := make([]*DedupEntry, 0, len(c.DedupPut))
	for _, e := range c.DedupPut {
		if e != nil {
			dedup = append(dedup, cloneDedup(e))
		}
	}
	cache := make([]memCacheEntry, len(c.CachePut))
	for i, e := range c.CachePut {
		cache[i] = newMemCacheEntry(e)
	}
	if err := CheckApprovals(c); err != nil {
		return fmt.Errorf("committing turn %d of session %q: %w", c.Record.Turn, c.Session, err)
	}
	if err := m.lock(ctx); err != nil {
		return fmt.Errorf("committing turn %d of session %q: %w", c.Record.Turn, c.Session, err)
	}
	defer m.mu.Unlock()
	if next := m.nextTurn(c.Session); rec.Turn != next {
		return fmt.Errorf("committing turn %d of session %q: next turn is %d: %w", rec.Turn, c.Session, next, ErrStaleTurn)
	}
	if err := m.checkWaitingCapLocked(c); err != nil {
		return fmt.Errorf("committing turn %d of session %q: %w", rec.Turn, c.Session, err)
	}
	m.commitLocked(c.Session, rec, turnID)
	m.countEventsLocked(c.Session, c.EventBlock)
	for _, a := range c.Approvals {
		k := memApprovalKey{a.Session, a.CallID}
		if old := m.approval[k]; old != nil {
			m.waiting.remove(old.Session, old.CallID)
		}
		m.approval[k] = CloneApproval(a)
		m.waiting.add(WaitingOf(a, c.Record.GetTurnId()))
	}
	if len(c.FetchedAdd)+len(dedup)+len(c.DedupDel) > 0 {
		key := memRunKey{c.Session, c.Record.Run}
		rs := m.runs[key]
		if rs == nil {
			rs = &RunState{Dedup: map[string]*DedupEntry{}, Fetched: map[string]bool{}}
			m.runs[key] = rs
		}
		for _, tool := range c.FetchedAdd {
			rs.Fetched[tool] = true
		}
		for _, e := range dedup {
			rs.Dedup[e.Key] = e
		}
		for _, k := range c.DedupDel {
			delete(rs.Dedup, k)
		}
	}
	for i, e := range c.CachePut {
		m.cache[e.Key] = cache[i]
	}
	return nil
}

// RecoverAll resolves every intent record and returns how many turns it
// resolved.
func (m *Memory) RecoverAll(ctx context.Context) (int, error) {
	if err := m.lock(ctx); err != nil {
		return 0, fmt.Errorf("recovering intents: %w", err)
	}
	sessions := make([]string, 0, len(m.intents))
	for s := range m.intents {
		sessions = append(sessions, s)
	}
	m.mu.Unlock()
	slices.Sort(sessions)
	n, err := RecoverSessions(ctx, sessions, func(ctx context.Context, session string) (bool, error) {
		return m.resolve(ctx, session, false)
	})
	if _, cerr := SettleClaimed(ctx, m, ""); cerr != nil {
		err = errors.Join(err, fmt.Errorf("recovering approvals: %w", cerr))
	}
	return n, err
}

// CacheGet returns a copy of the cached value if it exists and now is
// before its absolute expiry. A hit does not extend the expiry.
func (m *Memory) CacheGet(ctx context.Context, key string, now time.Time) ([]byte, bool, error) {
	if err := m.lock(ctx); err != nil {
		return nil, false, fmt.Errorf("reading cache entry %q: %w", key, err)
	}
	defer m.mu.Unlock()
	e, ok := m.cache[key]
	if !ok || (e.hasExpiry && now.UnixNano() >= e.expires) {
		return nil, false, nil
	}
	return append([]byte{}, e.value...), true, nil
}

// CachePut stores (or replaces) a copy of a value with an absolute expiry;
// a zero Expires never expires.
func (m *Memory) CachePut(ctx context.Context, e CacheEntry) error {
	ce := newMemCacheEntry(e)
	if err := m.lock(ctx); err != nil {
		return fmt.Errorf("writing cache entry %q: %w", e.Key, err)
	}
	defer m.mu.Unlock()
	m.cache[e.Key] = ce
	return nil
}

func newMemCacheEntry(e CacheEntry) memCacheEntry {
	ce := memCacheEntry{value: append([]byte{}, e.Value...)}
	if !e.Expires.IsZero() {
		ce.expires, ce.hasExpiry = e.Expires.UnixNano(), true
	}
	return ce
}

// SaveFileVersion keeps a copy of a version of a workspace file and returns
// its number (1, 2, 3… per file). Workspace and path are treated as Badger
// treats them.
func (m *Memory) SaveFileVersion(ctx context.Context, workspace, path string, content []byte, deleted bool, note string) (int64, error) {
	if err := m.lock(ctx); err != nil {
		return 0, fmt.Errorf("saving a version of %q: %w", path, err)
	}
	defer m.mu.Unlock()
	key := memFileKey{NormalizeWorkspace(workspace), path}
	vs := m.files[key]
	v := FileVersion{
		Version: int64(len(vs)) + 1,
		Time:    time.Unix(0, m.now().UnixNano()),
		Size:    int64(len(content)),
		Deleted: deleted,
		Note:    note,
	}
	m.files[key] = append(vs, memFileVersion{v: v, content: append([]byte{}, content...)})
	return v.Version, nil
}

// FileVersions lists a file's versions, oldest first (empty when it has none).
func (m *Memory) FileVersions(ctx context.Context, workspace, path string) ([]FileVersion, error) {
	if err := m.lock(ctx); err != nil {
		return nil, fmt.Errorf("listing versions of %q: %w", path, err)
	}
	defer m.mu.Unlock()
	vs := m.files[memFileKey{NormalizeWorkspace(workspace), path}]
	out := make([]FileVersion, 0, len(vs))
	for _, fv := range vs {
		out = append(out, fv.v)
	}
	return out, nil
}

// FileVersionContent returns a copy of one version's bytes and its
// description, or ErrNotFound.
func (m *Memory) FileVersionContent(ctx context.Context, workspace, path string, version int64) ([]byte, FileVersion, error) {
	if err := m.lock(ctx); err != nil {
		return nil, FileVersion{}, fmt.Errorf("reading version %d of %q: %w", version, path, err)
	}
	defer m.mu.Unlock()
	vs := m.files[memFileKey{NormalizeWorkspace(workspace), path}]
	if version < 1 || version > int64(len(vs)) {
		return nil, FileVersion{}, fmt.Errorf("reading version %d of %q: %w", version, path, ErrNotFound)
	}
	fv := vs[version-1]
	return append([]byte{}, fv.content...), fv.v, nil
}

// Close marks the store closed; it is idempotent and every other method
// returns ErrClosed afterwards.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

func cloneTurn(rec *messages.TurnRecord) *messages.TurnRecord {
	return proto.Clone(rec).(*messages.TurnRecord)
}

func cloneDedup(e *DedupEntry) *DedupEntry {
	c := *e
	c.Paths = slices.Clone(e.Paths)
	return &c
}

func cloneIntent(in *Intent) *Intent {
	c := *in
	if in.Assistant != nil {
		c.Assistant = proto.Clone(in.Assistant).(*messages.AssistantMessage)
	}
	if in.Decided != nil {
		c.Decided = make(map[int]*messages.ToolMessage, len(in.Decided))
		for i, m := range in.Decided {
			if m != nil {
				c.Decided[i] = proto.Clone(m).(*messages.ToolMessage)
			}
		}
	}
	c.Started = slices.Clone(in.Started)
	c.Names = slices.Clone(in.Names)
	c.IDs = slices.Clone(in.IDs)
	c.Tasks = slices.Clone(in.Tasks)
	return &c
}

// SetTaskLookup implements TaskResolver.
func (m *Memory) SetTaskLookup(l TaskLookup) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tasks = l
}
