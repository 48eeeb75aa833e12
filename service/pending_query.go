package service

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tooldispatch/tooldispatch/cachestore"
)

// Bounds of GET /v1/pending.
const (
	// defaultPendingLimit is a page's items when limit is not given;
	// maxPendingLimit the most a limit gets (a larger one is lowered to it).
	defaultPendingLimit = 50
	maxPendingLimit     = 200
	// pendingPageBytes: a page stops once its items hold about this many
	// bytes (at least one item), whatever its limit.
	pendingPageBytes = 1 << 20
	// maxFilterLen is the longest filter value taken: longer than any id.
	maxFilterLen = 1024
	// maxCursorLen is the longest cursor taken.
	maxCursorLen = 4096
)

// pendingParams are the query parameters GET /v1/pending takes.
var pendingParams = []string{"limit", "cursor", "session", "run", "tool", "call_id", "older_than", "include"}

// pendingQuery is a parsed GET /v1/pending.
type pendingQuery struct {
	// q holds the filters, the place to start after and the limit.
	q cachestore.WaitingQuery
	// turns: include=turn, the turns of the page's items once each.
	turns bool
	// first: no cursor, the first page (it carries the questions).
	first bool
	// filters identifies the filters as given, for the cursors of the
	// listing: a cursor is taken only with the filters it was made for.
	filters string
}

// parsePendingQuery reads the query of GET /v1/pending: every parameter
// once at most, known, with a value of its kind.
func parsePendingQuery(vals url.Values, now time.Time) (*pendingQuery, *apiError) {
	for k, v := range vals {
		if !slices.Contains(pendingParams, k) {
			return nil, errorf(http.StatusBadRequest, "unknown parameter %q: GET /v1/pending takes %s", clipParam(k), strings.Join(pendingParams, ", "))
		}
		if len(v) > 1 {
			return nil, errorf(http.StatusBadRequest, "parameter %q is given %d times: give it once", k, len(v))
		}
	}
	p := &pendingQuery{q: cachestore.WaitingQuery{Limit: defaultPendingLimit, MaxBytes: pendingPageBytes}}
	for name, dst := range map[string]*string{"session": &p.q.Session, "run": &p.q.Run, "tool": &p.q.Tool, "call_id": &p.q.CallID} {
		v := vals.Get(name)
		if len(v) > maxFilterLen {
			return nil, errorf(http.StatusBadRequest, "%s is longer than %d bytes", name, maxFilterLen)
		}
		*dst = v
	}
	if v := vals.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, errorf(http.StatusBadRequest, "limit must be a whole number of at least 1 (at most %d are given), got %q", maxPendingLimit, clipParam(v))
		}
		p.q.Limit = min(n, maxPendingLimit)
	}
	if v := vals.Get("older_than"); v != "" {
		before, e := parseOlderThan(v, now)
		if e != nil {
			return nil, e
		}
		p.q.Before = before
	}
	switch v := vals.Get("include"); v {
	case "":
	case "turn", "turns":
		p.turns = true
	default:
		return nil, errorf(http.StatusBadRequest, `include must be "turn", got %q`, clipParam(v))
	}
	p.filters = filtersID(vals)
	c := vals.Get("cursor")
	if c == "" {
		p.first = true
		return p, nil
	}
	after, e := decodeCursor(c, p.filters)
	if e != nil {
		return nil, e
	}
	p.q.After = after
	return p, nil
}

// parseOlderThan reads older_than: a positive duration ("90s", "2h"),
// waiting longer than that, or an RFC 3339 time, asked before it.
func parseOlderThan(v string, now time.Time) (time.Time, *apiError) {
	if d, err := time.ParseDuration(v); err == nil {
		if d <= 0 {
			return time.Time{}, errorf(http.StatusBadRequest, "older_than must be a positive duration, got %q", clipParam(v))
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	return time.Time{}, errorf(http.StatusBadRequest, `older_than must be a duration ("10m", "2h") or an RFC 3339 time, got %q`, clipParam(v))
}

// clipParam cuts a parameter quoted in an error message.
func clipParam(v string) string {
	if len(v) > 64 {
		return v[:64] + "…"
	}
	return v
}

// filtersID identifies the filters of a query as given.
func filtersID(vals url.Values) string {
	h := sha256.New()
	for _, k := range []string{"session", "run", "tool", "call_id", "older_than"} {
		h.Write([]byte(vals.Get(k)))
		h.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:12])
}

// cursor is what a cursor holds: the place of the last item of a page (the
// time it was asked, in Unix nanoseconds, its session and call id) and
// the filters of its listing. It is a place, not an offset and not a
// credential: it names no item that the filters would not list anyway.
type cursor struct {
	V       int    `json:"v"`
	Asked   int64  `json:"a"`
	Session string `json:"s"`
	CallID  string `json:"c"`
	Filters string `json:"f"`
}

// encodeCursor is the cursor of the place after pos.
func encodeCursor(pos cachestore.WaitingPos, filters string) string {
	b, _ := json.Marshal(cursor{V: 1, Asked: pos.Asked, Session: pos.Session, CallID: pos.CallID, Filters: filters})
	return base64.RawURLEncoding.EncodeToString(b)
}

// errBadCursor answers a cursor this service did not give.
var errBadCursor = errorf(http.StatusBadRequest, "cursor is not one GET /v1/pending gave: pass next_cursor as it came, with the same filters")

// decodeCursor reads a cursor made for the listing of filters.
func decodeCursor(s, filters string) (*cachestore.WaitingPos, *apiError) {
	if len(s) > maxCursorLen {
		return nil, errBadCursor
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, errBadCursor
	}
	var c cursor
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if dec.Decode(&c) != nil || dec.More() || c.V != 1 || c.Asked < 0 || c.Session == "" || c.CallID == "" ||
		len(c.Session) > maxFilterLen || len(c.CallID) > maxFilterLen {
		return nil, errBadCursor
	}
	if c.Filters != filters {
		return nil, errorf(http.StatusBadRequest, "cursor belongs to a listing with other filters: give the filters it was made with, or start again without a cursor")
	}
	return &cachestore.WaitingPos{Asked: c.Asked, Session: c.Session, CallID: c.CallID}, nil
}
