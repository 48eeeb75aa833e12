package service

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/faults"
	"github.com/tooldispatch/tooldispatch/cachestore/seam"
)

// answer is one call of Options.TurnAnswered.
type answer struct {
	session string
	turn    int64
	code    int
	summary string
}

// TestTurnAnswered: the service tells Options.TurnAnswered what the client
// of each turn was answered, streamed or not: the turn's number, the
// status and the statuses of its results, or the error of a turn whose
// commit failed for want of space (507) or for another reason (500).
func TestTurnAnswered(t *testing.T) {
	var mu sync.Mutex
	var got []answer
	inj := faults.New()
	f := newFixture(t, fixtureOpts{
		wrapStore: func(s cachestore.Store) cachestore.Store { return inj.Wrap(s) },
		answered: func(session string, turn int64, code int, summary string) {
			mu.Lock()
			got = append(got, answer{session, turn, code, summary})
			mu.Unlock()
		},
	})
	calc := func(id string) map[string]any {
		return turn("r", "all", call(t, id, "calculate", map[string]string{"expression": "6*7+" + id[1:]}), call(t, id+"x", "nope", map[string]string{}))
	}
	streamed := http.Header{"Accept": {"text/event-stream"}}
	steps := []struct {
		fault  string
		header http.Header
		want   answer
	}{
		{"", nil, answer{"s", 1, 200, "c1=ok c1x=unknown_tool"}},
		{faults.DiskFull, nil, answer{"s", 2, 507, "the turn failed: committing the turn: commit of session \"s\" turn 2: no space left on device"}},
		// The failed turns' calls started: their intents are resolved into
		// turns 2 and 3 (outcome_unknown) before the next turn.
		{faults.WriteError, streamed, answer{"s", 3, 500, "the turn failed: committing the turn: commit of session \"s\" turn 3: input/output error"}},
		{"", streamed, answer{"s", 4, 200, "c4=ok c4x=unknown_tool"}},
	}
	for i, st := range steps {
		inj.Clear()
		if st.fault != "" {
			inj.Set(faults.Rule{Ops: []seam.Kind{seam.CommitTurn}, Fault: faults.Fault{Kind: st.fault}})
		}
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		resp, body := f.request(ctx, "POST", "/v1/sessions/s/turns", calc(fmt.Sprintf("c%d", i+1)), st.header)
		cancel()
		mu.Lock()
		if len(got) != i+1 {
			mu.Unlock()
			t.Fatalf("step %d (%d %s): TurnAnswered was called %d times, want %d", i, resp.StatusCode, body, len(got), i+1)
		}
		a := got[i]
		mu.Unlock()
		if a.session != st.want.session || a.turn != st.want.turn || a.code != st.want.code || !strings.HasPrefix(a.summary, st.want.summary) {
			t.Errorf("step %d: TurnAnswered(%q, %d, %d, %q), want (%q, %d, %d, %q…)", i, a.session, a.turn, a.code, a.summary,
				st.want.session, st.want.turn, st.want.code, st.want.summary)
		}
		if st.header == nil && resp.StatusCode != a.code {
			t.Errorf("step %d: the client got %d, TurnAnswered was told %d", i, resp.StatusCode, a.code)
		}
	}
}

// TestInjectedStorageFaultsMetric: injected storage faults are counted by
// operation and fault.
func TestInjectedStorageFaultsMetric(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.metrics.InjectedStorage("commit", "disk_full")
	f.metrics.InjectedStorage("commit", "disk_full")
	f.metrics.InjectedStorage("intent", "stall")
	resp, body := f.do("GET", "/metrics", nil)
	for _, want := range []string{`tooldispatch_injected_storage_faults_total{fault="disk_full",op="commit"} 2`,
		`tooldispatch_injected_storage_faults_total{fault="stall",op="intent"} 1`} {
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("/metrics (%d) has no %q", resp.StatusCode, want)
		}
	}
}
