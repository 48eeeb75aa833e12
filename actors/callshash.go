package actors

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"

	"github.com/tooldispatch/tooldispatch/messages"
)

// callsHash identifies a turn's calls as pass 1 sees them, for turn ids
// (idempotency keys): the hex SHA-256 over each call, in order, of its id
// and name as rule 1 reads them and its canonical arguments from the parse
// of rule 2 (their raw text when they do not parse, or for a call beyond
// the turn's limit, which is not parsed). A client that sends the same
// calls again, whatever its JSON spacing or key order, gets the same hash.
func callsHash(calls []*messages.ToolCall, parsed []preparedCall) string {
	h := sha256.New()
	for i, tc := range calls {
		c := &parsed[i]
		args := c.args.Canonical
		if c.err != nil || args == nil {
			args = []byte(tc.GetFunction().GetArguments())
		}
		writeField(h, []byte(c.id))
		writeField(h, []byte(c.name))
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
