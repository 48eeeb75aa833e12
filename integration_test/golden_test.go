package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/tools/txtar"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/cachestore/badger"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
)

var update = flag.Bool("update", false, "rewrite the want sections of the golden scenarios")

// scenarioConfig is the config.json section of a scenario.
type scenarioConfig struct {
	Provider       string               `json:"provider"`
	Approve        string               `json:"approve"`
	AutoLoad       bool                 `json:"auto_load"`
	MaxConcurrency int                  `json:"max_concurrency"`
	ClientTools    []*messages.ToolSpec `json:"client_tools"`
	Exclude        []string             `json:"exclude"`
	// Answers answer tool_confirm events in order: true approves.
	Answers []bool `json:"answers"`
}

// turnLine is one line of turns.jsonl.
type turnLine struct {
	Run     string          `json:"run"`
	TurnID  string          `json:"turn_id"`
	Message json.RawMessage `json:"message"`
}

// resultLine is one line of want/results.jsonl.
type resultLine struct {
	Turn       int64  `json:"turn"`
	ToolCallID string `json:"tool_call_id"`
	Name       string `json:"name"`
	Status     string `json:"status"`
	Content    string `json:"content"`
}

// TestGolden runs every integration_test/testdata/*.txtar scenario: the
// scenario's workspace files (ws/…), its turns, and the expected results and
// event kinds per call. `go test ./integration_test -run Golden -update`
// rewrites the expectations.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txtar"), func(t *testing.T) { runScenario(t, f) })
	}
}

func runScenario(t *testing.T, file string) {
	ar, err := txtar.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	var cfg scenarioConfig
	var turns []byte
	for _, f := range ar.Files {
		switch {
		case f.Name == "config.json":
			if err := json.Unmarshal(f.Data, &cfg); err != nil {
				t.Fatalf("config.json: %v", err)
			}
		case f.Name == "turns.jsonl":
			turns = f.Data
		case strings.HasPrefix(f.Name, "ws/"):
			p := filepath.Join(ws, filepath.FromSlash(strings.TrimPrefix(f.Name, "ws/")))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, f.Data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	env := newEnv(t, ws, cfg)
	var results bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(turns))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var tl turnLine
		if err := json.Unmarshal(line, &tl); err != nil {
			t.Fatalf("turns.jsonl: %v", err)
		}
		var msg messages.AssistantMessage
		if err := json.Unmarshal(tl.Message, &msg); err != nil {
			t.Fatalf("turns.jsonl message: %v", err)
		}
		r := env.dispatch(&messages.DispatchTurn{Session: "golden", Run: tl.Run, TurnId: tl.TurnID, Provider: cfg.Provider,
			Approve: cfg.Approve, AutoLoadSchemas: cfg.AutoLoad, ClientTools: cfg.ClientTools, Exclude: cfg.Exclude, Message: &msg})
		if len(r.Messages) != len(msg.ToolCalls) {
			t.Fatalf("turn %d: %d results for %d calls", r.Turn, len(r.Messages), len(msg.ToolCalls))
		}
		for _, m := range r.Messages {
			b, _ := json.Marshal(resultLine{r.Turn, m.ToolCallId, m.Name, m.Status, scrub(m.Content, ws)})
			results.Write(b)
			results.WriteByte('\n')
		}
	}
	got := map[string][]byte{"want/results.jsonl": results.Bytes(), "want/events.txt": env.eventSummary()}
	if *update {
		for name, data := range got {
			setFile(ar, name, data)
		}
		if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	for name, data := range got {
		want := fileData(ar, name)
		if diff := cmp.Diff(string(want), string(data)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	env.checkPersisted(t)
}

var timestamp = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)

// scrub replaces what differs between runs: the workspace path and times.
func scrub(s, ws string) string {
	return timestamp.ReplaceAllString(strings.ReplaceAll(s, ws, "$WORK"), "$$TIME")
}

func fileData(ar *txtar.Archive, name string) []byte {
	for _, f := range ar.Files {
		if f.Name == name {
			return f.Data
		}
	}
	return nil
}

func setFile(ar *txtar.Archive, name string, data []byte) {
	for i := range ar.Files {
		if ar.Files[i].Name == name {
			ar.Files[i].Data = data
			return
		}
	}
	ar.Files = append(ar.Files, txtar.File{Name: name, Data: data})
}

// env is a dispatcher over the built-in tools, two test tools and a Badger
// store in a temporary directory.
type env struct {
	t     *testing.T
	d     *actors.Dispatcher
	store *badger.Store

	mu      sync.Mutex
	events  []*messages.Event
	answers []bool
	// onConfirm, when set, gets tool_confirm events instead of answers.
	onConfirm func(*messages.Event)
}

func newEnv(t *testing.T, dir string, sc scenarioConfig) *env {
	t.Helper()
	store, err := badger.Open(badger.TestOptions(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	w, err := builtin.OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	reg := toolkit.NewRegistry()
	toolkit.RegisterMeta(reg)
	builtin.Register(reg, builtin.Deps{Workspace: w, Versions: store})
	registerScenarioTools(reg)
	e := &env{t: t, store: store, answers: sc.Answers}
	e.d, err = actors.New(actors.Config{Registry: reg, Store: store, MaxConcurrency: sc.MaxConcurrency, Events: e.onEvent,
		Clock: func() time.Time { return time.Unix(1700000000, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.d.Close(ctx); err != nil {
			t.Error(err)
		}
		if err := store.Close(); err != nil {
			t.Error(err)
		}
		w.Close()
	})
	return e
}

func (e *env) onEvent(ev *messages.Event) {
	e.mu.Lock()
	e.events = append(e.events, ev)
	var answer, ok bool
	if ev.Kind == actors.EventToolConfirm && e.onConfirm != nil {
		f := e.onConfirm
		e.mu.Unlock()
		f(ev)
		return
	}
	if ev.Kind == actors.EventToolConfirm {
		if len(e.answers) > 0 {
			answer, ok = e.answers[0], true
			e.answers = e.answers[1:]
		}
	}
	e.mu.Unlock()
	if ok {
		go func() {
			_, _ = e.d.Confirm(context.Background(), &messages.ConfirmReply{Session: ev.Session, CallId: ev.CallId, ArgsHash: ev.ArgsHash, Approve: answer})
		}()
	}
}

func (e *env) dispatch(t *messages.DispatchTurn) *messages.TurnResult {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := e.d.Dispatch(ctx, t)
	if err != nil {
		e.t.Fatalf("dispatch: %v", err)
	}
	return r
}

// eventSummary lists, per turn and call, the kinds of its events in order.
func (e *env) eventSummary() []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	type key struct {
		turn int64
		call string
	}
	var order []key
	kinds := map[key][]string{}
	tools := map[key]string{}
	for _, ev := range e.events {
		k := key{ev.Turn, ev.CallId}
		if _, ok := kinds[k]; !ok {
			order = append(order, k)
		}
		kinds[k] = append(kinds[k], ev.Kind)
		if tools[k] == "" {
			tools[k] = ev.Tool
		}
	}
	sort.SliceStable(order, func(i, j int) bool { return order[i].turn < order[j].turn })
	var b bytes.Buffer
	for _, k := range order {
		fmt.Fprintf(&b, "turn %d %s %s: %s\n", k.turn, k.call, tools[k], strings.Join(kinds[k], " "))
	}
	return b.Bytes()
}

// checkPersisted: every call of every committed turn has exactly one tool
// message, and sequence numbers only grow.
func (e *env) checkPersisted(t *testing.T) {
	turns, err := e.store.Turns(context.Background(), "golden")
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range turns {
		if len(tr.ToolMessages) != len(tr.Assistant.GetToolCalls()) {
			t.Errorf("turn %d persisted %d messages for %d calls", tr.Turn, len(tr.ToolMessages), len(tr.Assistant.GetToolCalls()))
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var last uint64
	for _, ev := range e.events {
		if ev.Seq <= last {
			t.Errorf("event seq %d after %d", ev.Seq, last)
		}
		last = ev.Seq
	}
}
