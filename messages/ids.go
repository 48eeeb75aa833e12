package messages

import (
	"fmt"
	"strings"
)

// The pairing rule every shape shares: every call in gets exactly one
// reply out, carrying the call's id, in call order.
//
// Ids are trimmed. A call without an id (absent, empty or blank: a Gemini
// functionCall often has none) gets call_N, N its position among the
// turn's calls from 1; when another call of the turn already carries that
// id (given or made up), call_N_2, call_N_3… is the first one free. Made-up
// ids therefore never collide with a given id, so a call that names its id
// "call_1" is never taken for a repeat of a call without one. A repeated
// given id is kept: the dispatcher answers the later calls invalid_args
// under that same id, and the k-th reply carrying an id answers the k-th
// call carrying it.

// pairIDs gives every call of calls the id its reply carries, by the
// pairing rule above. It is deterministic: the same calls get the same ids.
func pairIDs(calls []*ToolCall) {
	for i, id := range CallIDs(calls) {
		calls[i].Id = id
	}
}

// CallIDs returns the id every call of calls carries by the pairing rule
// above, in call order, without changing calls.
func CallIDs(calls []*ToolCall) []string {
	ids := make([]string, len(calls))
	missing := false
	for i, c := range calls {
		ids[i] = strings.TrimSpace(c.GetId())
		missing = missing || ids[i] == ""
	}
	if !missing {
		return ids
	}
	taken := make(map[string]bool, len(calls))
	for _, id := range ids {
		if id != "" {
			taken[id] = true
		}
	}
	for i, id := range ids {
		if id == "" {
			base := fmt.Sprintf("call_%d", i+1)
			id = base
			for n := 2; taken[id]; n++ {
				id = fmt.Sprintf("%s_%d", base, n)
			}
			taken[id] = true
			ids[i] = id
		}
	}
	return ids
}
