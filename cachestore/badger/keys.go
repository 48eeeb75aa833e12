package badger

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/tooldispatch/tooldispatch/cachestore"
)

// Key prefixes. Every key starts with the layout version; a change of layout
// gets a new version prefix instead of rewriting old keys in place.
const (
	keyVersion = "v1/"

	prefixSession     = keyVersion + "s/"
	prefixRun         = keyVersion + "r/"
	prefixIntent      = keyVersion + "i/"
	prefixCache       = keyVersion + "c/"
	prefixFileVersion = keyVersion + "fv/"
	prefixFileContent = keyVersion + "fc/"
	prefixApproval    = keyVersion + "a/"
	// The index of what waits (waiting.go).
	prefixWaiting        = keyVersion + "w/"
	prefixWaitingSession = keyVersion + "ws/"
	keyWaitingBuilt      = keyVersion + "wi"
)

// turnDigits is the width of a zero-padded turn or version number in a key,
// so that byte order is numeric order.
const turnDigits = 16

// esc encodes a caller-chosen string (session, run, tool, key, path) as
// lowercase hex: the result never contains '/', so no id can reach into
// another's key space, and hex keeps byte order (Sessions lists in order).
func esc(s string) []byte {
	return appendEsc(make([]byte, 0, 2*len(s)), s)
}

// appendEsc appends esc(s) to b.
func appendEsc(b []byte, s string) []byte {
	const digits = "0123456789abcdef"
	for i := 0; i < len(s); i++ {
		b = append(b, digits[s[i]>>4], digits[s[i]&0x0f])
	}
	return b
}

// unesc reverses esc.
func unesc(b []byte) (string, error) {
	out, err := hex.AppendDecode(nil, b)
	if err != nil {
		return "", fmt.Errorf("decoding key part %q: %w", b, err)
	}
	return string(out), nil
}

// appendNum appends n zero-padded to turnDigits.
func appendNum(b []byte, n int64) []byte {
	var digits [20]byte
	d := strconv.AppendInt(digits[:0], n, 10)
	for i := len(d); i < turnDigits; i++ {
		b = append(b, '0')
	}
	return append(b, d...)
}

func join(parts ...[]byte) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	out := make([]byte, 0, n)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// The session, run and intent keys are built in one allocation each (a
// turn builds dozens): sessionKey and runKey size the buffer for what the
// caller appends (extra bytes).

// sessionKey is v1/s/{session}/, with room for extra more bytes.
func sessionKey(session string, extra int) []byte {
	b := make([]byte, 0, len(prefixSession)+2*len(session)+1+extra)
	return append(appendEsc(append(b, prefixSession...), session), '/')
}

// sessionPrefix is v1/s/{session}/.
func sessionPrefix(session string) []byte {
	return sessionKey(session, 0)
}

// metaKey is v1/s/{session}/meta.
func metaKey(session string) []byte {
	return append(sessionKey(session, len("meta")), "meta"...)
}

// eventsKey is v1/s/{session}/ev: the session's event counter.
func eventsKey(session string) []byte {
	return append(sessionKey(session, len("ev")), "ev"...)
}

// turnPrefix is v1/s/{session}/t/.
func turnPrefix(session string) []byte {
	return append(sessionKey(session, len("t/")), "t/"...)
}

// turnKey is v1/s/{session}/t/{turn}.
func turnKey(session string, turn int64) []byte {
	return appendNum(append(sessionKey(session, len("t/")+turnDigits), "t/"...), turn)
}

// turnIDKey is v1/s/{session}/id/{turn id}.
func turnIDKey(session, turnID string) []byte {
	return appendEsc(append(sessionKey(session, len("id/")+2*len(turnID)), "id/"...), turnID)
}

// runKey is v1/r/{session}/{run}/, with room for extra more bytes.
func runKey(session, run string, extra int) []byte {
	b := make([]byte, 0, len(prefixRun)+2*len(session)+1+2*len(run)+1+extra)
	b = append(appendEsc(append(b, prefixRun...), session), '/')
	return append(appendEsc(b, run), '/')
}

// runPrefix is v1/r/{session}/{run}/.
func runPrefix(session, run string) []byte {
	return runKey(session, run, 0)
}

// dedupKey is v1/r/{session}/{run}/d/{key}.
func dedupKey(session, run, key string) []byte {
	return appendEsc(append(runKey(session, run, len("d/")+2*len(key)), "d/"...), key)
}

// fetchedKey is v1/r/{session}/{run}/f/{tool}.
func fetchedKey(session, run, tool string) []byte {
	return appendEsc(append(runKey(session, run, len("f/")+2*len(tool)), "f/"...), tool)
}

// intentKeyOf is v1/i/{session}/, with room for extra more bytes.
func intentKeyOf(session string, extra int) []byte {
	b := make([]byte, 0, len(prefixIntent)+2*len(session)+1+extra)
	return append(appendEsc(append(b, prefixIntent...), session), '/')
}

// intentPrefix is v1/i/{session}/.
func intentPrefix(session string) []byte {
	return intentKeyOf(session, 0)
}

// intentKey is v1/i/{session}/{turn}.
func intentKey(session string, turn int64) []byte {
	return appendNum(intentKeyOf(session, turnDigits), turn)
}

// approvalPrefix is v1/a/{session}/, or v1/a/ for an empty session (every
// session's).
func approvalPrefix(session string) []byte {
	if session == "" {
		return []byte(prefixApproval)
	}
	return append(appendEsc([]byte(prefixApproval), session), '/')
}

// approvalKey is v1/a/{session}/{call id}.
func approvalKey(session, callID string) []byte {
	return appendEsc(approvalPrefix(session), callID)
}

// nanosDigits is the width of a zero-padded time in Unix nanoseconds in a
// key (a non-negative int64 has at most 19 digits).
const nanosDigits = 19

// appendNanos appends n (non-negative) zero-padded to nanosDigits.
func appendNanos(b []byte, n int64) []byte {
	var digits [20]byte
	d := strconv.AppendInt(digits[:0], n, 10)
	for i := len(d); i < nanosDigits; i++ {
		b = append(b, '0')
	}
	return append(b, d...)
}

// waitingKey is v1/w/{asked}/{session}/{call id}.
func waitingKey(pos cachestore.WaitingPos) []byte {
	b := make([]byte, 0, len(prefixWaiting)+nanosDigits+2+2*len(pos.Session)+2*len(pos.CallID))
	b = append(appendNanos(append(b, prefixWaiting...), pos.Asked), '/')
	b = append(appendEsc(b, pos.Session), '/')
	return appendEsc(b, pos.CallID)
}

// parseWaitingKey reads the place of a waiting key.
func parseWaitingKey(k []byte) (cachestore.WaitingPos, error) {
	rest, ok := bytes.CutPrefix(k, []byte(prefixWaiting))
	parts := bytes.Split(rest, []byte("/"))
	if !ok || len(parts) != 3 {
		return cachestore.WaitingPos{}, fmt.Errorf("waiting key %q: %w", k, cachestore.ErrCorrupt)
	}
	return waitingPos(parts[0], parts[1], parts[2])
}

func waitingPos(asked, session, callID []byte) (cachestore.WaitingPos, error) {
	n, err := parseNum(asked)
	if err != nil {
		return cachestore.WaitingPos{}, err
	}
	s, err := unesc(session)
	if err != nil {
		return cachestore.WaitingPos{}, err
	}
	c, err := unesc(callID)
	if err != nil {
		return cachestore.WaitingPos{}, err
	}
	return cachestore.WaitingPos{Asked: n, Session: s, CallID: c}, nil
}

// waitingSessionPrefix is v1/ws/{session}/.
func waitingSessionPrefix(session string) []byte {
	b := make([]byte, 0, len(prefixWaitingSession)+2*len(session)+1+nanosDigits+1)
	return append(appendEsc(append(b, prefixWaitingSession...), session), '/')
}

// waitingSessionKey is v1/ws/{session}/{asked}/{call id}.
func waitingSessionKey(pos cachestore.WaitingPos) []byte {
	b := append(appendNanos(waitingSessionPrefix(pos.Session), pos.Asked), '/')
	return appendEsc(b, pos.CallID)
}

// parseWaitingSessionKey reads the place of a key of session's entries,
// from rest, what follows waitingSessionPrefix(session).
func parseWaitingSessionKey(session string, rest []byte) (cachestore.WaitingPos, error) {
	asked, call, ok := bytes.Cut(rest, []byte("/"))
	if !ok {
		return cachestore.WaitingPos{}, fmt.Errorf("waiting key of session %q: %w", session, cachestore.ErrCorrupt)
	}
	pos, err := waitingPos(asked, nil, call)
	pos.Session = session
	return pos, err
}

// cacheKey is v1/c/{key}.
func cacheKey(key string) []byte {
	return append([]byte(prefixCache), esc(key)...)
}

// workspaceID names a workspace in keys: the first 16 bytes of the SHA-256
// of its cleaned absolute path, in hex.
func workspaceID(workspace string) string {
	sum := sha256.Sum256([]byte(cachestore.NormalizeWorkspace(workspace)))
	return hex.EncodeToString(sum[:16])
}

// fileVersionPrefix is v1/fv/{workspace}/{path}/.
func fileVersionPrefix(workspace, path string) []byte {
	return join([]byte(prefixFileVersion), []byte(workspaceID(workspace)), []byte("/"), esc(path), []byte("/"))
}

// fileVersionKey is v1/fv/{workspace}/{path}/{version}: the version's metadata.
func fileVersionKey(workspace, path string, version int64) []byte {
	return appendNum(fileVersionPrefix(workspace, path), version)
}

// fileContentKey is v1/fc/{workspace}/{path}/{version}: the version's bytes.
func fileContentKey(workspace, path string, version int64) []byte {
	return appendNum(join([]byte(prefixFileContent), []byte(workspaceID(workspace)), []byte("/"), esc(path), []byte("/")), version)
}

// parseNum reads a zero-padded number written by appendNum.
func parseNum(b []byte) (int64, error) {
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("decoding number %q in key: %w", b, err)
	}
	return n, nil
}
