package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/secrets"
)

// intentLog is a store that keeps a copy of every intent written, and
// whose commits fail once dead is set: what a process killed before its
// commit leaves behind.
type intentLog struct {
	*cachestore.Memory
	dead atomic.Bool

	mu      sync.Mutex
	written []cachestore.Intent
}

func (s *intentLog) WriteIntent(ctx context.Context, in *cachestore.Intent) error {
	if err := s.Memory.WriteIntent(ctx, in); err != nil {
		return err
	}
	c := *in
	c.Tasks = slices.Clone(in.Tasks)
	s.mu.Lock()
	s.written = append(s.written, c)
	s.mu.Unlock()
	return nil
}

func (s *intentLog) CommitTurn(ctx context.Context, c *cachestore.TurnCommit) error {
	if s.dead.Load() {
		return errors.New("the process is gone")
	}
	return s.Memory.CommitTurn(ctx, c)
}

func (s *intentLog) last() (cachestore.Intent, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.written) == 0 {
		return cachestore.Intent{}, 0
	}
	return s.written[len(s.written)-1], len(s.written)
}

// TestTaskIDReachesTheIntent: a tool that learns the id of the task an
// outside server runs its call as (Call.NoteTask) gets it into the call's
// intent record, durable before NoteTask returns, through the session's
// commit actor. After a crash (the commit never comes) the store's task
// lookup is asked about that task and settles the call with its outcome.
func TestTaskIDReachesTheIntent(t *testing.T) {
	store := &intentLog{Memory: cachestore.NewMemory()}
	noted := make(chan error, 1)
	release := make(chan struct{})
	reg := toolkit.NewRegistry()
	reg.Register(toolkit.Tool{Name: "other", Description: "Runs before the task.", Schema: []byte(`{"type":"object"}`),
		Handler: func(context.Context, *toolkit.Call) (toolkit.Result, error) {
			return toolkit.Result{Content: "other"}, nil
		}})
	reg.Register(toolkit.Tool{Name: "job", Description: "Runs as a task of an outside server.", Schema: []byte(`{"type":"object"}`),
		Timeout: time.Minute,
		Handler: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
			noted <- c.NoteTask(ctx, "task-7")
			<-release
			return toolkit.Result{Content: "the live result"}, nil
		}})
	d, err := New(Config{Registry: reg, Store: store, MaxConcurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(func() {
		free()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = d.Close(ctx)
	})
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := d.Dispatch(ctx, turn("s", "r", call("c0", "other", `{}`), call("c1", "job", `{}`)))
		done <- err
	}()
	select {
	case err := <-noted:
		if err != nil {
			t.Fatalf("NoteTask: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the job never ran")
	}
	in, writes := store.last()
	want := []cachestore.TaskRef{{Index: 1, ID: "task-7"}}
	if len(in.Tasks) != 1 || in.Tasks[0].Index != want[0].Index || in.Tasks[0].ID != want[0].ID || in.Tasks[0].At.IsZero() {
		t.Fatalf("when NoteTask returned, the last intent written (of %d) names tasks %+v; want %+v with the time it was learned", writes, in.Tasks, want)
	}
	// The process dies before its commit.
	store.dead.Store(true)
	free()
	if err := <-done; err == nil {
		t.Fatal("the turn committed though the store refused its commit")
	}

	var asked []cachestore.TaskRef
	store.SetTaskLookup(func(_ context.Context, in *cachestore.Intent) map[int]*messages.ToolMessage {
		asked = append(asked, in.Tasks...)
		return map[int]*messages.ToolMessage{1: {Status: "ok", Content: "the task's own result"}}
	})
	if n, err := store.RecoverAll(context.Background()); err != nil || n != 1 {
		t.Fatalf("RecoverAll = %d, %v; want 1 turn resolved", n, err)
	}
	if len(asked) != 1 || asked[0].ID != "task-7" {
		t.Errorf("the lookup was asked about %+v, want task-7", asked)
	}
	turns, err := store.Turns(context.Background(), "s")
	if err != nil || len(turns) != 1 {
		t.Fatalf("Turns = %d, %v", len(turns), err)
	}
	got := turns[0].ToolMessages
	if len(got) != 2 || got[0].Status != "outcome_unknown" || got[1].Status != "ok" || got[1].Content != "the task's own result" {
		t.Errorf("resolved messages = %v; want c0 outcome_unknown (no task), c1 ok with the task's result", got)
	}
}

// TestTaskLookupSettlesAsACall: the store's task lookup settles each
// started call that ran as a task as a call is settled: ok with the
// result's text and media, error and timeout with the next: line, canceled
// for a task the server cancelled, outcome_unknown saying why for one it
// could not learn; texts redacted. It asks about started calls' tasks only.
func TestTaskLookupSettlesAsACall(t *testing.T) {
	outcomes := map[string]func() (toolkit.Result, error){
		"t-ok": func() (toolkit.Result, error) {
			return toolkit.Result{Content: "done", Parts: []toolkit.Part{{Kind: toolkit.PartImage, MIMEType: "image/png", Data: []byte{1}}}}, nil
		},
		"t-err": func() (toolkit.Result, error) { return toolkit.Result{}, errors.New("broke with " + redactValue) },
		"t-cancel": func() (toolkit.Result, error) {
			return toolkit.Result{}, fmt.Errorf("stopped (%w)", toolkit.ErrCanceled)
		},
		"t-late": func() (toolkit.Result, error) {
			return toolkit.Result{}, fmt.Errorf("cancelled at the bound: %w", context.DeadlineExceeded)
		},
		"t-unknown": func() (toolkit.Result, error) {
			return toolkit.Result{}, fmt.Errorf("no such task: %w", toolkit.ErrOutcomeUnknown)
		},
	}
	var asked []string
	resume := func(_ context.Context, id string, _ time.Time, c *toolkit.Call) (toolkit.Result, error) {
		asked = append(asked, c.ID+":"+id)
		return outcomes[id]()
	}
	lookup := TaskLookup(resume, secrets.NewRedactor(map[string]string{"K": redactValue}), zerolog.Nop())
	in := &cachestore.Intent{Session: "s", Turn: 1, Started: []int{0, 1, 2, 3, 4},
		IDs: []string{"c0", "c1", "c2", "c3", "c4", "c5"}, Names: []string{"j", "j", "j", "j", "j", "j"}}
	for i, id := range []string{"t-ok", "t-err", "t-cancel", "t-late", "t-unknown", "t-never-started"} {
		in.Tasks = append(in.Tasks, cachestore.TaskRef{Index: i, ID: id})
	}
	got := lookup(context.Background(), in)
	if want := []string{"c0:t-ok", "c1:t-err", "c2:t-cancel", "c3:t-late", "c4:t-unknown"}; !slices.Equal(asked, want) {
		t.Errorf("asked %q, want %q (in call order, started calls only)", asked, want)
	}
	want := []struct {
		status string
		has    string
	}{{"ok", "done"}, {"error", "\nnext: "}, {"canceled", "stopped"}, {"timeout", "\nnext: "}, {"outcome_unknown", "no such task"}}
	for i, w := range want {
		m := got[i]
		if m == nil || m.Status != w.status || !strings.Contains(m.Content, w.has) || m.ToolCallId != in.IDs[i] {
			t.Errorf("call %d = %v; want %s containing %q", i, m, w.status, w.has)
			continue
		}
		if strings.Contains(m.Content, redactValue) {
			t.Errorf("call %d carries the secret: %q", i, m.Content)
		}
	}
	if len(got[0].GetParts()) != 1 {
		t.Errorf("the ok call's media were dropped: %v", got[0])
	}
	if got[5] != nil {
		t.Errorf("a call that never started was settled: %v", got[5])
	}
}
