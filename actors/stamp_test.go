package actors

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// stampTool registers "stamped", a read-only tool whose Stamp (what a file
// tool computes from the files it reads) calls stamp.
func stampTool(reg *toolkit.Registry, p *probe, stamp func(toolkit.Args) string) {
	reg.Register(toolkit.Tool{Name: "stamped", Description: "Reads, with a stamp.", Schema: json.RawMessage(objSchema),
		Concurrent: true, ReadOnly: true, Stamp: stamp,
		Handler: func(_ context.Context, c *toolkit.Call) (toolkit.Result, error) {
			p.enter(c.ID)
			defer p.leave(c.ID)
			return toolkit.Result{Content: "read " + c.Args.String("path")}, nil
		}})
}

// TestCancelReachesAHangingStamp: a tool's Stamp (it opens and hashes
// files) runs off the actors' goroutines, so a turn canceled while a stamp
// hangs ends at once, its calls canceled, and the stamp that returns later
// changes nothing.
func TestCancelReachesAHangingStamp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		settleBubble(t)
		entered, release := make(chan struct{}), make(chan struct{})
		h := newHarness(t, func(c *Config) {
			stampTool(c.Registry, newProbe(), func(toolkit.Args) string {
				close(entered)
				<-release
				return "state"
			})
		})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan *messages.TurnResult, 1)
		go func() {
			r, err := h.d.Dispatch(ctx, turn("s1", "r1", call("a", "stamped", `{"path":"f"}`), call("b", "echo", `{"x":"1"}`)))
			if err != nil {
				t.Errorf("dispatch: %v", err)
			}
			done <- r
		}()
		<-entered
		cancel()
		synctest.Wait()
		select {
		case r := <-done:
			if diff := cmp.Diff([]string{"a=canceled", "b=canceled"}, statuses(r)); diff != "" {
				t.Errorf("statuses (-want +got):\n%s", diff)
			}
		default:
			t.Error("the canceled turn still waits for a stamp that hangs")
			close(release)
			<-done
			return
		}
		close(release)
		synctest.Wait()
	})
}

// TestStampFencesDedup: a repeat is answered from the run's de-dup table
// only while the stamp of what the call read is the same; a stamp that
// panics answers nothing from the table (the call runs), and the turn goes
// on.
func TestStampFencesDedup(t *testing.T) {
	var state atomic.Value
	h := newHarness(t, func(c *Config) {
		stampTool(c.Registry, newProbe(), func(toolkit.Args) string {
			s := state.Load().(string)
			if s == "panic" {
				panic("the stamp failed")
			}
			return s
		})
	})
	run := func(id string) string {
		r := h.dispatch(turn("s1", "r1", call(id, "stamped", `{"path":"f"}`)))
		return statuses(r)[0]
	}
	state.Store("v1")
	got := []string{run("c1"), run("c2")}
	state.Store("v2")
	got = append(got, run("c3"), run("c4"))
	state.Store("panic")
	got = append(got, run("c5"))
	want := []string{"c1=ok", "c2=deduped", "c3=ok", "c4=deduped", "c5=ok"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
