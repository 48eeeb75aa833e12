package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/faults"
	"github.com/tooldispatch/tooldispatch/cachestore/seam"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/service"
	"github.com/tooldispatch/tooldispatch/toolkit/chaos"
)

// storageLogName is the storage-fault log chaos mode keeps in the data
// directory: a JSON line (chaos.StorageRecord) per injected storage fault,
// and one per answer to a turn that had one. chaos report reads it.
const storageLogName = "chaos-storage.jsonl"

// maxAnswerText bounds the answer a storage-fault record quotes.
const maxAnswerText = 300

// maxWaiting bounds the turns whose answer a process waits for (a turn
// answered by another cluster member never is): past it they are
// forgotten, and their faults are reported without an answer.
const maxWaiting = 1 << 12

// storageChaos injects the storage faults of the operator's chaos policy
// at the store's seam (cachestore/faults, each operation decided by
// chaos.Policy.DecideStorage) and marks each: a warning in the log, the
// tooldispatch_injected_storage_faults_total metric (serve) and a line in
// the data directory's storage-fault log, followed, once the client of its
// turn is answered, by what it was answered. Safe for concurrent use; a
// nil *storageChaos injects nothing.
type storageChaos struct {
	inj     *faults.Injector // immutable after newStorageChaos
	log     zerolog.Logger   // immutable
	metrics atomic.Pointer[service.Metrics]

	mu     sync.Mutex
	file   *os.File        // guarded by mu; nil once closed
	turns  map[turnOf]bool // guarded by mu: turns with a fault whose answer is not recorded
	warned bool            // guarded by mu: a failed write was logged
}

type turnOf struct {
	session string
	turn    int64
}

// newStorageChaos opens the storage-fault log in dataDir and returns the
// injector of p's storage rules, or nil when p has none.
func newStorageChaos(p *chaos.Policy, dataDir string, log zerolog.Logger) (*storageChaos, error) {
	if !p.HasStorage() {
		return nil, nil
	}
	name := filepath.Join(dataDir, storageLogName)
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("chaos mode's storage-fault log: %w", err)
	}
	c := &storageChaos{inj: faults.New(), log: log, file: f, turns: map[turnOf]bool{}}
	c.inj.OnInject = c.injected
	c.inj.SetDecide(storageDecide(p))
	log.Warn().Uint64("seed", p.Seed).Int("rules", len(p.Storage)).Str("file", name).
		Msg("chaos mode injects storage faults: each is logged, counted and recorded (tooldispatch chaos report lists them)")
	return c, nil
}

// storageDecide is the chaos decision of p for the store's seam: an
// operation's fault is drawn from its own facts.
func storageDecide(p *chaos.Policy) faults.Decide {
	return func(op *seam.Op, attempt int) (faults.Fault, bool) {
		d := p.DecideStorage(chaos.StorageOp{Op: op.Kind.String(), Session: op.Session, Run: op.Run, Turn: op.Turn,
			Key: op.Key, Attempt: attempt})
		return faults.Fault{Kind: d.Kind, Delay: d.Delay}, d.Injected()
	}
}

// wrap returns s with the storage faults injected (s itself for a nil c).
func (c *storageChaos) wrap(s cachestore.Store) cachestore.Store {
	if c == nil {
		return s
	}
	return c.inj.Wrap(s)
}

// setMetrics counts the faults injected from now on in m.
func (c *storageChaos) setMetrics(m *service.Metrics) {
	if c != nil && m != nil {
		c.metrics.Store(m)
	}
}

// injected marks one injected fault (faults.Injector.OnInject).
func (c *storageChaos) injected(j faults.Injected) {
	op := j.Op.Kind.String()
	var delay string
	if j.Fault.Delay > 0 {
		delay = j.Fault.Delay.Round(time.Millisecond).String()
	}
	ev := c.log.Warn().Str("op", op).Str("fault", j.Fault.Kind)
	if delay != "" {
		ev = ev.Str("delay", delay)
	}
	if j.Op.Session != "" {
		ev = ev.Str("session", j.Op.Session).Int64("turn", j.Op.Turn)
	}
	ev.Msg("chaos mode injected a storage fault")
	if m := c.metrics.Load(); m != nil {
		m.InjectedStorage(op, j.Fault.Kind)
	}
	key := j.Op.Key
	if j.Op.Kind == seam.CachePut {
		// A cache key may hold a URL and its query: recorded as a digest.
		sum := sha256.Sum256([]byte(key))
		key = "sha256:" + hex.EncodeToString(sum[:8])
	}
	rec := chaos.StorageRecord{Time: j.Time, Op: op, Fault: j.Fault.Kind, Delay: delay, Session: j.Op.Session,
		Run: j.Op.Run, Turn: j.Op.Turn, Key: key}
	c.mu.Lock()
	defer c.mu.Unlock()
	if rec.Session != "" && rec.Turn > 0 {
		if len(c.turns) >= maxWaiting {
			clear(c.turns)
		}
		c.turns[turnOf{rec.Session, rec.Turn}] = true
	}
	c.writeLocked(rec)
}

// answered records what the client of a turn was answered, when the turn
// had a fault.
func (c *storageChaos) answered(session string, turn int64, answer string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := turnOf{session, turn}
	if !c.turns[k] {
		return
	}
	delete(c.turns, k)
	c.writeLocked(chaos.StorageRecord{Time: time.Now(), Session: session, Turn: turn, Answer: messages.ClipText(answer, maxAnswerText)})
}

func (c *storageChaos) writeLocked(rec chaos.StorageRecord) {
	if c.file == nil {
		return
	}
	b, err := json.Marshal(rec)
	if err == nil {
		_, err = c.file.Write(append(b, '\n'))
	}
	if err != nil && !c.warned {
		c.warned = true
		c.log.Warn().Err(err).Str("file", c.file.Name()).Msg("chaos mode could not record a storage fault")
	}
}

// close closes the storage-fault log.
func (c *storageChaos) close() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.file == nil {
		return nil
	}
	err := c.file.Close()
	c.file = nil
	return err
}

// runAnswer is what run's caller saw of a turn: the results it printed, or
// its exit status and message.
func runAnswer(res *messages.TurnResult, err error) string {
	var xe *exitError
	if errors.As(err, &xe) {
		return fmt.Sprintf("exit %d: %v", xe.code, xe)
	}
	if err != nil {
		return "failed: " + err.Error()
	}
	return "printed: " + statusSummary(res.GetMessages())
}

// statusSummary is "id=status" of each message.
func statusSummary(ms []*messages.ToolMessage) string {
	b := make([]byte, 0, 16*len(ms))
	for i, m := range ms {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, m.GetToolCallId()+"="+m.GetStatus()...)
	}
	return string(b)
}

// readStorageLog reads the storage-fault log of dataDir (nothing when
// there is none).
func readStorageLog(dataDir string) ([]chaos.StorageRecord, error) {
	f, err := os.Open(filepath.Join(dataDir, storageLogName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []chaos.StorageRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r chaos.StorageRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			// A line that does not parse (one a kill cut short) is skipped.
			continue
		}
		out = append(out, r)
	}
	return out, sc.Err()
}
