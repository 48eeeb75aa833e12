package actors

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// callsHash identifies a turn's calls as pass 1 sees them, for turn ids
// (idempotency keys): the hex SHA-256 over each call, in order, of its
// normalised id (made up by messages.CallIDs when missing), its normalised name and its
// canonical arguments under the configured limits (their raw text when
// they do not parse). A client
// that sends the same calls again, whatever its JSON spacing or key order,
// gets the same hash.
func callsHash(calls []*messages.ToolCall, lim toolkit.Limits) string {
	h := sha256.New()
	ids := messages.CallIDs(calls)
	for i, tc := range calls {
		id := ids[i]
		raw := tc.GetFunction().GetArguments()
		args := []byte(raw)
		if a, err := toolkit.ParseArgs(raw, lim); err == nil {
			args = a.Canonical
		}
		writeField(h, []byte(id))
		writeField(h, []byte(toolkit.NormaliseName(tc.GetFunction().GetName())))
		writeField(h, args)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// writeField writes b with its length, so fields cannot run into each other.
func writeField(h hash.Hash, b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
}
