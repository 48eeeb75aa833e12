package memory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Keys inside a workspace's namespace.
const (
	// recordPrefix starts every record's key; the sequence number follows,
	// zero-padded so that key order is id order.
	recordPrefix = "rec/"
	// seqKey holds the highest sequence number handed out, so that a second
	// Memory over the same store and workspace notices new records.
	seqKey = "seq"
	// nsPrefix starts the namespace of a workspace's records.
	nsPrefix = "errors/"
)

// Outcomes of a recorded error.
const (
	OutcomeResolved  = "resolved"
	OutcomeFailed    = "failed"
	OutcomeAbandoned = "abandoned"
)

// Store is what Memory keeps its records in and reads the session's turns
// from: four methods of the embedding program's store (cachestore's Badger,
// Memory and PostgreSQL stores satisfy it). Implementations are safe for
// concurrent use, and a write is durable when it returns.
type Store interface {
	// KVGet returns the value of key in namespace ns, or an error matching
	// fs.ErrNotExist when there is none.
	KVGet(ctx context.Context, ns, key string) ([]byte, error)
	// KVPut stores value under key, replacing any earlier value.
	KVPut(ctx context.Context, ns, key string, value []byte) error
	// KVList returns the records of ns whose keys start with keyPrefix, in
	// key order.
	KVList(ctx context.Context, ns, keyPrefix string) ([]toolkit.KVRecord, error)
	// Turns returns the committed turns of a session in turn order; none
	// (and no error) for an unknown session.
	Turns(ctx context.Context, session string) ([]*messages.TurnRecord, error)
}

// creator is a Store that can write a record only into a free key
// (cachestore's KVCreator): with it, processes sharing the store never
// give two records one number.
type creator interface {
	KVCreate(ctx context.Context, ns, key string, value []byte) (stored []byte, created bool, err error)
}

// Option adjusts a Memory (New).
type Option func(*Memory)

// Scope says which sessions read an error record: its error_history, and
// the past fixes quoted in a failed call's result. A record is written by a
// model, so it is untrusted text: shared across sessions it is a channel
// from one session's model (and whoever steers it) into every other's.
type Scope string

// The scopes of the error memory.
const (
	// ScopeSession, the default: a record is read only in the session that
	// wrote it.
	ScopeSession Scope = "session"
	// ScopeWorkspace: every session of the workspace reads every record
	// (an operator's choice for sessions of one user or one team); a
	// record from another session is quoted marked as such.
	ScopeWorkspace Scope = "workspace"
)

// Validate reports a scope that is neither session nor workspace ("" is
// session).
func (s Scope) Validate() error {
	switch s {
	case "", ScopeSession, ScopeWorkspace:
		return nil
	}
	return fmt.Errorf("memory: error scope %q is neither %q nor %q", string(s), ScopeSession, ScopeWorkspace)
}

// WithScope sets which sessions read a record (default ScopeSession). New
// panics on an invalid scope: check it with Scope.Validate first.
func WithScope(s Scope) Option { return func(m *Memory) { m.scope = s } }

// Shared says other processes write the same store (the members of a
// cluster serving the same workspace path): every read of the records first
// checks the stored sequence number (one KVGet) and reloads when another
// process added records, and each record claims its number with KVCreate
// when the store offers it, so concurrent writers never overwrite each
// other.
func Shared() Option { return func(m *Memory) { m.shared = true } }

// maxClaims bounds how often add retries a record number another process
// took meanwhile.
const maxClaims = 16

// Memory is the error memory of one workspace, plus chat_history. Records
// are cached in memory after the first use and the cache is updated on every
// write, so PastFixes costs no store access in the common case.
//
// A Memory is safe for concurrent use. It should be the only one writing its
// workspace's records in its store; a second one over the same store and
// workspace notices the other's writes when it writes itself.
type Memory struct {
	// immutable after New
	store Store
	dir   string // absolute workspace directory
	ns    string // KV namespace of the workspace's records
	now   func() time.Time
	// shared: other processes write the store too (Shared)
	shared bool
	// scope: which sessions read a record (WithScope)
	scope Scope

	mu      sync.RWMutex
	loaded  bool               // guarded by mu
	records []*record          // guarded by mu; in id order
	byID    map[string]*record // guarded by mu; by upper-case id ("E12")
	lastSeq int64              // guarded by mu
	// seenSeq is the stored sequence number as last read or written;
	// guarded by mu
	seenSeq int64
}

// New returns the error memory of the workspace in workspaceDir, kept in
// store. workspaceDir is made absolute and its symlinks resolved (when it
// exists), so different spellings of one directory share one memory. New
// reads nothing yet: records load on first use.
func New(store Store, workspaceDir string, opts ...Option) *Memory {
	if store == nil {
		panic("memory: New needs a store")
	}
	dir := canonicalDir(workspaceDir)
	m := &Memory{store: store, dir: dir, ns: Namespace(dir), now: time.Now, scope: ScopeSession}
	for _, o := range opts {
		o(m)
	}
	if err := m.scope.Validate(); err != nil {
		panic(err)
	}
	if m.scope == "" {
		m.scope = ScopeSession
	}
	return m
}

// Scope returns which sessions read a record.
func (m *Memory) Scope() Scope { return m.scope }

// visible reports whether a call of session reads r.
func (m *Memory) visible(r *record, session string) bool {
	return m.scope == ScopeWorkspace || r.Session == session
}

// visibleTo returns the records session reads, in id order.
func (m *Memory) visibleTo(recs []*record, session string) []*record {
	if m.scope == ScopeWorkspace {
		return recs
	}
	out := make([]*record, 0, len(recs))
	for _, r := range recs {
		if r.Session == session {
			out = append(out, r)
		}
	}
	return out
}

// Namespace returns the KV namespace that holds the error records
// of the workspace in dir (as given; New canonicalises it first).
func Namespace(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return nsPrefix + hex.EncodeToString(sum[:16])
}

func canonicalDir(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if resolved, err := filepath.EvalSymlinks(dir); err == nil {
		dir = resolved
	}
	return filepath.Clean(dir)
}

// Dir returns the workspace directory the memory belongs to.
func (m *Memory) Dir() string { return m.dir }

// Tools returns write_error, error_history and chat_history, in name order.
func (m *Memory) Tools() []toolkit.Tool {
	return []toolkit.Tool{m.chatHistoryTool(), m.errorHistoryTool(), m.writeErrorTool()}
}

// Register adds the memory's tools to reg. Like toolkit.Registry.Register,
// it panics on a registration mistake.
func (m *Memory) Register(reg *toolkit.Registry) {
	for _, t := range m.Tools() {
		reg.Register(t)
	}
}

// record is one remembered error, as stored (JSON).
type record struct {
	Seq     int64     `json:"seq"`
	Tool    string    `json:"tool"`
	Symptom string    `json:"symptom"`
	Cause   string    `json:"cause,omitempty"`
	Action  string    `json:"action"`
	Outcome string    `json:"outcome"`
	Tags    []string  `json:"tags,omitempty"`
	Time    time.Time `json:"time"`
	Session string    `json:"session,omitempty"`
	Run     string    `json:"run,omitempty"`

	// derived when loaded or written, not stored
	symptomKW keywordSet
	causeKW   keywordSet
	actionKW  keywordSet
	tagKW     keywordSet
}

// id is the record's id as the model sees it.
func (r *record) id() string { return "E" + strconv.FormatInt(r.Seq, 10) }

func (r *record) index() {
	r.symptomKW = newKeywordSet(r.Symptom)
	r.causeKW = newKeywordSet(r.Cause)
	r.actionKW = newKeywordSet(r.Action)
	r.tagKW = newKeywordSet(r.Tags...)
}

func recordKey(seq int64) string { return fmt.Sprintf("%s%012d", recordPrefix, seq) }

// snapshot returns the cached records, loading them on first use. The slice
// is shared and only ever appended to under mu: callers must not modify it.
func (m *Memory) snapshot(ctx context.Context) ([]*record, error) {
	stale := false
	if m.shared {
		seq, err := m.storedSeq(ctx)
		if err != nil {
			return nil, err
		}
		m.mu.RLock()
		stale = m.loaded && seq != m.seenSeq
		m.mu.RUnlock()
	}
	m.mu.RLock()
	if m.loaded && !stale {
		recs := m.records
		m.mu.RUnlock()
		return recs, nil
	}
	m.mu.RUnlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.loaded || stale {
		if err := m.loadLocked(ctx); err != nil {
			return nil, err
		}
	}
	return m.records, nil
}

// loadLocked reads every record of the workspace into the cache.
func (m *Memory) loadLocked(ctx context.Context) error {
	kvs, err := m.store.KVList(ctx, m.ns, recordPrefix)
	if err != nil {
		return fmt.Errorf("loading the error memory: %w", err)
	}
	recs := make([]*record, 0, len(kvs))
	byID := make(map[string]*record, len(kvs))
	var last int64
	for _, kv := range kvs {
		r := &record{}
		if err := json.Unmarshal(kv.Value, r); err != nil || r.Seq <= 0 {
			// A record that does not decode is skipped rather than making
			// the whole memory unreadable.
			continue
		}
		r.index()
		recs = append(recs, r)
		byID[r.id()] = r
		last = max(last, r.Seq)
	}
	seq, err := m.storedSeq(ctx)
	if err != nil {
		return err
	}
	m.records, m.byID, m.lastSeq, m.seenSeq, m.loaded = recs, byID, max(last, seq), seq, true
	return nil
}

// storedSeq reads the highest sequence number handed out (0 when none).
func (m *Memory) storedSeq(ctx context.Context) (int64, error) {
	v, err := m.store.KVGet(ctx, m.ns, seqKey)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("loading the error memory: %w", err)
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, nil
	}
	return n, nil
}

// add stores r under the next id and adds it to the cache.
func (m *Memory) add(ctx context.Context, r *record) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.loaded {
		if err := m.loadLocked(ctx); err != nil {
			return "", err
		}
	} else if seq, err := m.storedSeq(ctx); err != nil {
		return "", err
	} else if seq != m.lastSeq {
		// Another Memory wrote to this workspace's records: reload.
		if err := m.loadLocked(ctx); err != nil {
			return "", err
		}
	}
	for claims := 0; ; claims++ {
		r.Seq = m.lastSeq + 1
		v, err := json.Marshal(r)
		if err != nil {
			return "", fmt.Errorf("encoding the error record: %w", err)
		}
		c, ok := m.store.(creator)
		if !m.shared || !ok {
			if err := m.store.KVPut(ctx, m.ns, recordKey(r.Seq), v); err != nil {
				return "", fmt.Errorf("storing the error record: %w", err)
			}
			break
		}
		_, created, err := c.KVCreate(ctx, m.ns, recordKey(r.Seq), v)
		if err != nil {
			return "", fmt.Errorf("storing the error record: %w", err)
		}
		if created {
			break
		}
		// Another process took the number: catch up and take the next.
		if claims == maxClaims {
			return "", fmt.Errorf("storing the error record: %d record numbers in a row were taken by other writers meanwhile", maxClaims+1)
		}
		if err := m.loadLocked(ctx); err != nil {
			return "", err
		}
		m.lastSeq = max(m.lastSeq, r.Seq)
	}
	if err := m.store.KVPut(ctx, m.ns, seqKey, []byte(strconv.FormatInt(r.Seq, 10))); err != nil {
		return "", fmt.Errorf("storing the error record: %w", err)
	}
	m.seenSeq = r.Seq
	r.index()
	m.lastSeq = r.Seq
	// Snapshots handed out earlier keep their length, so appending (which
	// writes only past it) leaves them intact.
	m.records = append(m.records, r)
	m.byID[r.id()] = r
	return r.id(), nil
}

// lookup returns the record with id ("E12", "e12" or "12").
func (m *Memory) lookup(ctx context.Context, id string) (*record, error) {
	if _, err := m.snapshot(ctx); err != nil {
		return nil, err
	}
	id = strings.ToUpper(strings.TrimSpace(id))
	if !strings.HasPrefix(id, "E") {
		id = "E" + id
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.byID[id], nil
}
