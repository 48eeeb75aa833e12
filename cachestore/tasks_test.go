package cachestore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/storetest"
	"github.com/tooldispatch/tooldispatch/messages"
)

// TestIntentTasksCodec: an intent's tasks come back from the record codec
// as written, a task learned at no known time included.
func TestIntentTasksCodec(t *testing.T) {
	in := storetest.TaskIntent("s", 3)
	in.Tasks = append(in.Tasks, cachestore.TaskRef{Index: 4, ID: "no time"})
	b, err := cachestore.EncodeIntent(in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := cachestore.DecodeIntent(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Tasks) != len(in.Tasks) {
		t.Fatalf("decoded %d tasks, want %d", len(got.Tasks), len(in.Tasks))
	}
	for i, w := range in.Tasks {
		g := got.Tasks[i]
		if g.Index != w.Index || g.ID != w.ID || !g.At.Equal(w.At) || g.At.IsZero() != w.At.IsZero() {
			t.Errorf("task %d = %+v, want %+v", i, g, w)
		}
	}
}

// TestTaskOutcomesOfAnotherIntent: what a lookup learned settles only the
// intent it was learned of: an intent of the same turn naming another
// task (written again meanwhile) reads outcome_unknown naming its own.
func TestTaskOutcomesOfAnotherIntent(t *testing.T) {
	in := storetest.TaskIntent("s", 1)
	ok := func(context.Context, *cachestore.Intent) map[int]*messages.ToolMessage {
		return map[int]*messages.ToolMessage{0: {Status: "ok", Content: "done"}}
	}
	looked := cachestore.LookUpTasks(context.Background(), ok, "s", in)
	if rec := cachestore.ResolveIntentWith(in, time.Now(), looked); rec.ToolMessages[0].Status != "ok" {
		t.Fatalf("the intent looked up resolved call 0 %s, want ok", rec.ToolMessages[0].Status)
	}
	other := storetest.TaskIntent("s", 1)
	other.Tasks[0].ID = "another task"
	m := cachestore.ResolveIntentWith(other, time.Now(), looked).ToolMessages[0]
	if m.Status != "outcome_unknown" || !strings.Contains(m.Content, `"another task"`) {
		t.Errorf("an intent naming another task = %s %q; want outcome_unknown naming \"another task\"", m.Status, m.Content)
	}
	// A status a lookup may not give (awaiting_approval would wait for a
	// person who was never asked) is not taken.
	bad := func(context.Context, *cachestore.Intent) map[int]*messages.ToolMessage {
		return map[int]*messages.ToolMessage{0: {Status: cachestore.StatusAwaitingApproval, Content: "x"}}
	}
	m = cachestore.ResolveIntentWith(in, time.Now(), cachestore.LookUpTasks(context.Background(), bad, "s", in)).ToolMessages[0]
	if m.Status != "outcome_unknown" {
		t.Errorf("a lookup's %s was taken: %s %q", cachestore.StatusAwaitingApproval, m.Status, m.Content)
	}
}
