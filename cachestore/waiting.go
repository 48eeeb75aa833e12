package cachestore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/tooldispatch/tooldispatch/messages"
)

// The index of what waits. Every store keeps, beside each deferred
// approval, a small entry of what a listing shows of it (Waiting), written
// in the transaction that creates the approval (CommitTurn), rewritten by
// the one that claims it and deleted by the one that settles it. A listing
// (ListWaiting) reads only these entries, in the order of WaitingPos, a
// page at a time: never a session's turns, never the approval's canonical
// arguments or the state it is bound to.

// Bounds of what an index entry keeps of an approval: what the dispatcher
// shows (16 KiB of arguments, 64 KiB of diff, 4 KiB of note), with room
// for the marks it cuts them with. An approval stored with more (written
// by another program) is cut to them.
const (
	MaxWaitingShown = 16<<10 + 64
	MaxWaitingDiff  = 64<<10 + 64
	MaxWaitingNote  = 4<<10 + 64
)

// Bounds of one listing (WaitingQuery): how many items it returns by
// default and at most, how many entries it examines at most (a filter
// that matches few entries returns a short page and where to go on), and
// how many bytes of items it gathers at most (at least one item).
const (
	DefaultWaitingLimit = 50
	MaxWaitingLimit     = 500
	MaxWaitingScan      = 10_000
	MaxWaitingBytes     = 1 << 20
)

// DefaultMaxWaiting is the cap of a store's waiting approvals that the
// dispatcher applies when its configuration sets none
// (TurnCommit.MaxWaiting).
const DefaultMaxWaiting = 100_000

// ErrWaitingCap: a commit would have taken the store's waiting approvals
// past the cap it carried (TurnCommit.MaxWaiting); nothing of it was
// written. A *WaitingCapError says how many wait and the cap.
var ErrWaitingCap = errors.New("cachestore: too many approvals waiting")

// WaitingCapError is the ErrWaitingCap of one commit.
type WaitingCapError struct {
	// Cap is the commit's MaxWaiting; Waiting how many approvals the store
	// held waiting (or was about to, for commits being written beside it).
	Cap, Waiting int64
}

func (e *WaitingCapError) Error() string {
	return fmt.Sprintf("%v: %d wait, the cap is %d", ErrWaitingCap, e.Waiting, e.Cap)
}

// Is makes errors.Is(err, ErrWaitingCap) true.
func (e *WaitingCapError) Is(target error) bool { return target == ErrWaitingCap }

// Room is how many more approvals the cap lets wait.
func (e *WaitingCapError) Room() int64 { return max(0, e.Cap-e.Waiting) }

// Waiting is one entry of the index of what waits: a deferred approval as
// a listing shows it.
type Waiting struct {
	Session string `json:"session"`
	Run     string `json:"run"`
	Turn    int64  `json:"turn"`
	// TurnID is the turn's id (empty for a turn sent without one).
	TurnID string `json:"turn_id,omitempty"`
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Shown is the arguments as the person is shown them (Approval.Shown),
	// ArgsHash the hash an answer must name.
	Shown    string `json:"shown,omitempty"`
	ArgsHash string `json:"args_hash"`
	// Diff and Note are the preview.
	Diff    string    `json:"diff,omitempty"`
	Note    string    `json:"note,omitempty"`
	Ceiling string    `json:"ceiling,omitempty"`
	Asked   time.Time `json:"asked"`
	// Claimed: an approving answer took it and its call may be running;
	// a listing leaves it out.
	Claimed bool `json:"claimed,omitempty"`
}

// WaitingOf is the index entry of an approval of the turn whose id is
// turnID.
func WaitingOf(a *Approval, turnID string) *Waiting {
	return &Waiting{Session: a.Session, Run: a.Run, Turn: a.Turn, TurnID: turnID, CallID: a.CallID, Tool: a.Tool,
		Shown: clipTo(a.Shown, MaxWaitingShown), ArgsHash: a.ArgsHash, Diff: clipTo(a.Diff, MaxWaitingDiff),
		Note: clipTo(a.Note, MaxWaitingNote), Ceiling: a.Ceiling, Asked: a.Asked.UTC(), Claimed: a.Claimed}
}

// clipTo cuts s to at most n bytes, at a rune start, marked.
func clipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return messages.ClipText(s, n-len("…"))
}

// Pos is the entry's place in the index.
func (w *Waiting) Pos() WaitingPos {
	return WaitingPos{Asked: AskedNanos(w.Asked), Session: w.Session, CallID: w.CallID}
}

// Size estimates the bytes of the entry, for a listing's byte bound.
func (w *Waiting) Size() int {
	return 160 + len(w.Session) + len(w.Run) + len(w.TurnID) + len(w.CallID) + len(w.Tool) + len(w.Shown) +
		len(w.ArgsHash) + len(w.Diff) + len(w.Note) + len(w.Ceiling)
}

// EncodeWaiting is the stored form of an index entry.
func EncodeWaiting(w *Waiting) []byte {
	b, _ := json.Marshal(w) // plain fields only: never fails
	return b
}

// DecodeWaiting reads a stored index entry.
func DecodeWaiting(b []byte) (*Waiting, error) {
	w := &Waiting{}
	if err := json.Unmarshal(b, w); err != nil {
		return nil, fmt.Errorf("decoding an entry of the waiting index: %w", ErrCorrupt)
	}
	return w, nil
}

// AskedNanos is t in Unix nanoseconds, held to [0, MaxInt64]: the first
// part of an entry's place in the index.
func AskedNanos(t time.Time) int64 {
	switch {
	case t.Before(time.Unix(0, 0)):
		return 0
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// WaitingPos is a place in the index: entries are ordered by the time they
// were asked (Unix nanoseconds), then session, then call id.
type WaitingPos struct {
	Asked   int64
	Session string
	CallID  string
}

// Compare orders positions as the index does: -1, 0 or +1.
func (p WaitingPos) Compare(q WaitingPos) int {
	if c := cmp.Compare(p.Asked, q.Asked); c != 0 {
		return c
	}
	if c := strings.Compare(p.Session, q.Session); c != 0 {
		return c
	}
	return strings.Compare(p.CallID, q.CallID)
}

// WaitingQuery asks for one page of the index: the entries after After, in
// index order, that pass every filter set, leaving out claimed ones.
type WaitingQuery struct {
	// After, when set, is where the page starts: entries strictly after it.
	After *WaitingPos
	// Session, Run, Tool and CallID keep only the entries with that
	// value; empty keeps all.
	Session string
	Run     string
	Tool    string
	CallID  string
	// Before keeps only the entries asked before it; zero keeps all.
	Before time.Time
	// Limit: at most this many items (DefaultWaitingLimit when not
	// positive, at most MaxWaitingLimit). MaxScan: at most this many
	// entries examined (MaxWaitingScan when not positive or above it); a
	// store whose database applies the filters itself (PostgreSQL) bounds
	// the entries it returns instead.
	// MaxBytes: the page stops once its items' Size reach it (at least
	// one item; MaxWaitingBytes when not positive or above it).
	Limit    int
	MaxScan  int
	MaxBytes int
}

// Bounded returns q with its bounds filled in and held to their maxima.
func (q WaitingQuery) Bounded() WaitingQuery {
	if q.Limit <= 0 {
		q.Limit = DefaultWaitingLimit
	}
	q.Limit = min(q.Limit, MaxWaitingLimit)
	if q.MaxScan <= 0 || q.MaxScan > MaxWaitingScan {
		q.MaxScan = MaxWaitingScan
	}
	if q.MaxBytes <= 0 || q.MaxBytes > MaxWaitingBytes {
		q.MaxBytes = MaxWaitingBytes
	}
	return q
}

// Matches reports whether w passes the query's filters (its place and its
// claim aside).
func (q *WaitingQuery) Matches(w *Waiting) bool {
	return (q.Session == "" || w.Session == q.Session) && (q.Run == "" || w.Run == q.Run) &&
		(q.Tool == "" || w.Tool == q.Tool) && (q.CallID == "" || w.CallID == q.CallID) && q.InTime(AskedNanos(w.Asked))
}

// InTime reports whether an entry asked at nanos passes Before.
func (q *WaitingQuery) InTime(nanos int64) bool {
	return q.Before.IsZero() || nanos < AskedNanos(q.Before)
}

// WaitingPage is one page of the index.
type WaitingPage struct {
	Items []*Waiting
	// Next, when set, is where the next page starts (WaitingQuery.After):
	// the page stopped at its limit, its bytes or its scan before the end
	// of the index. A page may be short, even empty, while Next is set;
	// the listing is over when Next is nil.
	Next *WaitingPos
}

// WaitingPager gathers a page from entries given in index order: what
// each store's ListWaiting does with the entries it reads.
type WaitingPager struct {
	q       WaitingQuery
	page    WaitingPage
	bytes   int
	scanned int
	last    WaitingPos
	full    bool
}

// NewWaitingPager starts a page for q (bounded).
func NewWaitingPager(q WaitingQuery) *WaitingPager {
	return &WaitingPager{q: q.Bounded()}
}

// Query is the bounded query.
func (p *WaitingPager) Query() *WaitingQuery { return &p.q }

// Offer offers the next entry, at pos, read by load only when the page
// takes it (load returns nil for an entry the caller knows fails a filter,
// which still counts as examined). It reports whether the page takes
// more. Entries at or before After, or asked at or after Before, must not
// be offered.
func (p *WaitingPager) Offer(pos WaitingPos, load func() (*Waiting, error)) (bool, error) {
	if p.full {
		// An entry follows a full page: the listing goes on after it.
		p.page.Next = &p.last
		return false, nil
	}
	w, err := load()
	if err != nil {
		return false, err
	}
	p.scanned++
	p.last = pos
	if w != nil && !w.Claimed && p.q.Matches(w) {
		p.page.Items = append(p.page.Items, w)
		p.bytes += w.Size()
	}
	if len(p.page.Items) >= p.q.Limit || p.bytes >= p.q.MaxBytes || p.scanned >= p.q.MaxScan {
		p.full = true
	}
	return true, nil
}

// Page is the page gathered: Next is set when an entry was offered after
// the page was full.
func (p *WaitingPager) Page() WaitingPage {
	return p.page
}

// WaitingIndex lists the index of what waits.
type WaitingIndex interface {
	// ListWaiting returns one page of the index (see WaitingQuery).
	ListWaiting(ctx context.Context, q WaitingQuery) (WaitingPage, error)
}
