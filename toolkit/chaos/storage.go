package chaos

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Storage fault kinds: what the store's seam (cachestore/faults, whose
// kinds have the same names) does to an operation a storage rule hits.
const (
	StorageDiskFull   = "disk_full"   // refuse the write, nothing written: no space left on the device
	StorageWriteError = "write_error" // refuse the write, nothing written: an I/O error
	StorageSyncError  = "sync_error"  // apply the write, then report it failed (a failing fsync)
	StorageSlowSync   = "slow_fsync"  // apply the write, answer after the delay
	StorageStall      = "stall"       // hold the operation for the delay, then run it
)

// StorageKinds lists the storage fault kinds.
var StorageKinds = []string{StorageDiskFull, StorageWriteError, StorageSyncError, StorageSlowSync, StorageStall}

// StorageOps are the store operations a storage rule may name, by the names
// of the store's seam (cachestore/seam): a turn's intent records and its
// commit, an amendment (a client tool's result or an answer after its
// turn), a deferred approval's claim and settlement, the end of a run, and
// a tool's write to the result cache.
var StorageOps = []string{"intent", "commit", "amend", "claim_approval", "settle_approval", "end_run", "cache_put"}

// MaxStorageDelay is the longest a slow fsync or a stall may wait: well
// within the time the dispatcher gives one store operation, so that a
// stalled operation runs rather than ends the turn.
const MaxStorageDelay = 30 * time.Second

// StorageFault is one fault a storage rule may inject.
type StorageFault struct {
	Kind        string  `toml:"kind" json:"kind"`
	Probability float64 `toml:"probability" json:"probability"`
	// The wait of a slow fsync or a stall: fixed Delay, or uniform between
	// Min and Max; at most MaxStorageDelay.
	Delay Duration `toml:"delay" json:"delay,omitzero"`
	Min   Duration `toml:"min" json:"min,omitzero"`
	Max   Duration `toml:"max" json:"max,omitzero"`
}

// StorageRule matches store operations by name (StorageOps) and lists the
// faults it may inject; at most one fault is drawn per operation, with the
// faults' probabilities (their sum must be at most 1). The first rule that
// names an operation decides.
type StorageRule struct {
	Ops    []string       `toml:"ops" json:"ops"`
	Faults []StorageFault `toml:"faults" json:"faults"`
}

// HasStorage reports whether p injects storage faults.
func (p *Policy) HasStorage() bool { return p != nil && len(p.Storage) > 0 }

// StorageOp is what a storage decision is drawn from: the facts of one
// store operation that do not depend on scheduling.
type StorageOp struct {
	// Op is the operation's name (StorageOps).
	Op string
	// Session, Run and Turn name what the operation is about ("" and 0
	// when it is about no session, as a cache write).
	Session string
	Run     string
	Turn    int64
	// Key tells operations of one turn apart: the ids of the calls an
	// intent records as started, the call of an approval, the cache key.
	Key string
	// Attempt counts the earlier operations with the same facts (0 for
	// the first), so that one tried again is decided anew.
	Attempt int
}

// StorageDecision is the fault drawn for one store operation, or none.
type StorageDecision struct {
	// Kind is one of StorageKinds, "" for none.
	Kind string
	// Delay of a slow fsync or a stall (never 0 for them).
	Delay time.Duration
}

// Injected reports whether a fault was drawn.
func (d StorageDecision) Injected() bool { return d.Kind != "" }

// DecideStorage draws the fault of op: the first storage rule naming the
// operation decides. The same seed and facts always give the same decision,
// whatever was decided before.
func (p *Policy) DecideStorage(op StorageOp) StorageDecision {
	if p == nil {
		return StorageDecision{}
	}
	for ri, r := range p.Storage {
		if !slices.Contains(r.Ops, op.Op) {
			continue
		}
		u, roll := p.storageUniform(op, ri)
		acc := 0.0
		for _, f := range r.Faults {
			acc += f.Probability
			if u >= acc {
				continue
			}
			d := StorageDecision{Kind: f.Kind}
			if f.Kind == StorageSlowSync || f.Kind == StorageStall {
				d.Delay = f.Delay.Duration
				if d.Delay <= 0 {
					d.Delay = f.Min.Duration + time.Duration(float64(f.Max.Duration-f.Min.Duration)*unit(roll))
				}
				// A stall of 0 would hold the operation until released.
				d.Delay = max(d.Delay, time.Millisecond)
			}
			return d
		}
		return StorageDecision{}
	}
	return StorageDecision{}
}

// storageUniform derives a number in [0,1) and a second roll from the
// seed, the operation's facts and the rule. Strings are written with their
// length, so that no two different operations hash alike.
func (p *Policy) storageUniform(op StorageOp, rule int) (float64, uint64) {
	h := sha256.New()
	var buf [8]byte
	word := func(x uint64) {
		binary.LittleEndian.PutUint64(buf[:], x)
		h.Write(buf[:])
	}
	str := func(s string) {
		word(uint64(len(s)))
		h.Write([]byte(s))
	}
	word(p.Seed)
	str("storage")
	str(op.Op)
	str(op.Session)
	str(op.Run)
	word(uint64(op.Turn))
	str(op.Key)
	word(uint64(op.Attempt))
	word(uint64(rule))
	sum := h.Sum(nil)
	return unit(binary.LittleEndian.Uint64(sum[:8])), binary.LittleEndian.Uint64(sum[8:16])
}

// validateStorage names the first bad field of the storage rules.
func (p *Policy) validateStorage() error {
	for i, r := range p.Storage {
		if len(r.Ops) == 0 {
			return fmt.Errorf("storage[%d].ops: empty", i)
		}
		for _, op := range r.Ops {
			if !slices.Contains(StorageOps, op) {
				return fmt.Errorf("storage[%d].ops: %q is not one of %s", i, op, strings.Join(StorageOps, ", "))
			}
		}
		sum := 0.0
		for j, f := range r.Faults {
			where := fmt.Sprintf("storage[%d].faults[%d]", i, j)
			if f.Probability < 0 || f.Probability > 1 || math.IsNaN(f.Probability) {
				return fmt.Errorf("%s.probability must be within 0 and 1", where)
			}
			sum += f.Probability
			if err := f.validate(where); err != nil {
				return err
			}
		}
		if sum > 1+1e-9 {
			return fmt.Errorf("storage[%d]: probabilities add up to %.3f, more than 1", i, sum)
		}
	}
	return nil
}

func (f *StorageFault) validate(where string) error {
	delays := f.Delay.Duration != 0 || f.Min.Duration != 0 || f.Max.Duration != 0
	switch f.Kind {
	case StorageDiskFull, StorageWriteError, StorageSyncError:
		if delays {
			return fmt.Errorf("%s: %s takes no delay, min or max", where, f.Kind)
		}
		return nil
	case StorageSlowSync, StorageStall:
	default:
		return fmt.Errorf("%s.kind %q is not one of %s", where, f.Kind, strings.Join(StorageKinds, ", "))
	}
	if f.Delay.Duration < 0 || f.Min.Duration < 0 || f.Max.Duration < 0 {
		return fmt.Errorf("%s: a delay cannot be negative", where)
	}
	if f.Delay.Duration <= 0 && (f.Max.Duration <= 0 || f.Min.Duration > f.Max.Duration) {
		return fmt.Errorf("%s: %s needs delay, or min <= max", where, f.Kind)
	}
	for _, d := range []time.Duration{f.Delay.Duration, f.Max.Duration} {
		if d > MaxStorageDelay {
			return fmt.Errorf("%s: a delay of %s is over the most, %s", where, d, MaxStorageDelay)
		}
	}
	return nil
}
