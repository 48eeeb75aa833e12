package toolkit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Preview is what a person is shown of a call that changes workspace files
// when asked to approve it (SPEC §16, "approvals bound to what the person
// saw"): what the call would do to the files as they are now, and the state
// of those files that this was computed from.
type Preview struct {
	// Diff is a unified diff of the change; empty when there is none to
	// show (the call would fail, the file is too large, the content is not
	// known before the call runs).
	Diff string
	// Note says why there is no diff, or what else the person should know.
	Note string
	// State is the state of every file the preview read, from the same
	// read as Diff: one line per path, "path\x00state\n", where state is
	// the content's sha256, or that the file is missing, a directory, or
	// too large to hash (then its size and modification time). The
	// approval holds only while Tool.FileState returns the same.
	State string
}

// StateHash is the hex sha256 of the preview's State, which an approval is
// bound to: it is what a tool_confirm and an Approver are shown of State.
func (p Preview) StateHash() string {
	if p.State == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(p.State))
	return hex.EncodeToString(sum[:16])
}

// StatePaths returns the paths whose state differs between two States
// (a path in one only counts), in the order of a.
func StatePaths(a, b string) []string {
	parse := func(s string) (order []string, m map[string]string) {
		m = map[string]string{}
		for line := range strings.SplitSeq(s, "\n") {
			path, state, ok := strings.Cut(line, "\x00")
			if !ok {
				continue
			}
			order = append(order, path)
			m[path] = state
		}
		return order, m
	}
	oa, ma := parse(a)
	ob, mb := parse(b)
	var out []string
	for _, p := range oa {
		if s, ok := mb[p]; !ok || s != ma[p] {
			out = append(out, p)
		}
	}
	for _, p := range ob {
		if _, ok := ma[p]; !ok {
			out = append(out, p)
		}
	}
	return out
}

// The two hooks of a tool that changes workspace files (Tool.Preview and
// Tool.FileState).
type (
	// PreviewFunc computes a call's Preview from the files as they are now.
	PreviewFunc func(ctx context.Context, a Args) Preview
	// FileStateFunc returns the State of the files a call's Preview reads,
	// as they are now, in the same form as Preview.State.
	FileStateFunc func(ctx context.Context, a Args) string
)
