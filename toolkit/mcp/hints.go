package mcp

import (
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hints is what a tool's annotations decide, once trust is applied.
// Annotations are the server's word: they count only for a server the
// operator marks trusted; for any other, every hint is ignored and the
// tool is taken for a write of unknown effect (approval asked, alone in
// call order, a repeat of a success answered from the first).
type hints struct {
	// readOnly (readOnlyHint): no approval needed; the tool's calls make
	// no de-duplication entry of the server stale.
	readOnly bool
	// notIdempotent (idempotentHint false on a tool that is not
	// read-only): every call runs, a repeat included (toolkit.Tool.NoDedup).
	notIdempotent bool
	// concurrent: a read-only tool of a server whose operator set
	// concurrent = true runs in parallel under the limit.
	concurrent bool
	// note is shown with every confirmation of the tool's calls (its
	// destructiveHint).
	note string
}

// hints applies the server's trust to t's annotations. MCP's defaults
// stand for an annotation the server leaves out: readOnlyHint false,
// idempotentHint false, destructiveHint true.
func (s *server) hints(t *mcp.Tool) hints {
	if !s.cfg.Trusted {
		return hints{}
	}
	a := t.Annotations
	if a == nil {
		a = &mcp.ToolAnnotations{}
	}
	if a.ReadOnlyHint {
		return hints{readOnly: true, concurrent: s.cfg.Concurrent}
	}
	h := hints{notIdempotent: !a.IdempotentHint}
	switch {
	case a.DestructiveHint == nil:
		h.note = fmt.Sprintf("MCP server %q (trusted) does not say that this tool leaves existing data alone: "+
			"by MCP's default it may delete or overwrite data.", s.name)
	case *a.DestructiveHint:
		h.note = fmt.Sprintf("MCP server %q (trusted) marks this tool destructive (destructiveHint): "+
			"it may delete or overwrite data.", s.name)
	}
	return h
}
