package seam

import (
	"google.golang.org/protobuf/proto"

	"github.com/tooldispatch/tooldispatch/cachestore"
)

// approvalClaimBytes is what a claim adds: the approval is rewritten
// marked claimed (its arguments are not known to the seam).
const approvalClaimBytes = 4 << 10

// IntentBytes estimates the bytes an intent record adds to the store.
func IntentBytes(in *cachestore.Intent) int64 {
	n := proto.Size(in.Assistant) + len(in.Session) + len(in.Run) + len(in.TurnID) + len(in.Provider) + len(in.CallsHash)
	for _, m := range in.Decided {
		n += proto.Size(m)
	}
	for i := range in.Names {
		n += len(in.Names[i])
	}
	for i := range in.IDs {
		n += len(in.IDs[i])
	}
	return int64(n + 8*len(in.Started))
}

// CommitBytes estimates the bytes a turn's commit adds to the store: its
// record, its run-state changes, cache entries and approvals.
func CommitBytes(c *cachestore.TurnCommit) int64 {
	n := proto.Size(c.Record) + len(c.Session)
	for _, f := range c.FetchedAdd {
		n += len(f)
	}
	for _, e := range c.DedupPut {
		n += len(e.Key) + len(e.Tool) + len(e.Content) + len(e.Scope) + len(e.Stamp)
		for _, p := range e.Paths {
			n += len(p)
		}
	}
	for _, e := range c.CachePut {
		n += len(e.Key) + len(e.Value)
	}
	for _, a := range c.Approvals {
		n += len(cachestore.EncodeApproval(a))
	}
	return int64(n)
}
