package space_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/space"
)

const mib = 1 << 20

// disk is a file system whose free space the test sets.
type disk struct {
	free atomic.Uint64
	gone atomic.Bool
}

func (d *disk) Free(string) (uint64, error) {
	if d.gone.Load() {
		return 0, fs.ErrNotExist
	}
	return d.free.Load(), nil
}

func newGuard(t *testing.T, d *disk, log *bytes.Buffer, changes *[]space.Status) *space.Guard {
	t.Helper()
	g, err := space.New(space.Options{Dir: "/data", Reserve: 20 * mib, Floor: 4 * mib, Free: d.Free,
		Logger: zerolog.New(log), OnChange: func(s space.Status) { *changes = append(*changes, s) }})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestAdmitBelowTheReserve: below the reserve a turn is refused with a
// message naming the folder, the free space and the reserve; a log line
// and OnChange mark the change once each way; once space is back turns
// are admitted again.
func TestAdmitBelowTheReserve(t *testing.T) {
	d := &disk{}
	d.free.Store(30 * mib)
	var log bytes.Buffer
	var changes []space.Status
	g := newGuard(t, d, &log, &changes)
	if err := g.Admit(); err != nil {
		t.Fatalf("Admit with 30 MiB free: %v", err)
	}
	d.free.Store(19 * mib)
	err := g.Admit()
	var ns *cachestore.NoSpaceError
	if !errors.As(err, &ns) || !errors.Is(err, cachestore.ErrNoSpace) {
		t.Fatalf("Admit with 19 MiB free = %v, want a NoSpaceError", err)
	}
	for _, want := range []string{"/data", "19 MiB free", "reserve of 20 MiB"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	_ = g.Admit() // still low: no second line
	d.free.Store(25 * mib)
	if err := g.Admit(); err != nil {
		t.Fatalf("Admit once space is back: %v", err)
	}
	if len(changes) != 2 || !changes[0].Low || changes[0].Free != 19*mib || changes[1].Low {
		t.Errorf("OnChange saw %+v, want low at 19 MiB then back", changes)
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "below its free-space reserve") || !strings.Contains(lines[1], "back above") {
		t.Errorf("log lines: %q", lines)
	}
}

// TestWritesBelowTheFloor: a write is refused, before anything is
// written, when it would leave less than the floor free, counting the
// writes under way; reads and deletions always pass.
func TestWritesBelowTheFloor(t *testing.T) {
	d := &disk{}
	d.free.Store(10 * mib)
	var log bytes.Buffer
	var changes []space.Status
	g := newGuard(t, d, &log, &changes)
	m := cachestore.NewMemory()
	s := g.Wrap(m)
	ctx := context.Background()
	if err := s.KVPut(ctx, "ns", "a", make([]byte, 5*mib)); err != nil {
		t.Fatalf("a 5 MiB write with 10 MiB free and a 4 MiB floor: %v", err)
	}
	err := s.KVPut(ctx, "ns", "b", make([]byte, 7*mib))
	var ns *cachestore.NoSpaceError
	if !errors.As(err, &ns) || ns.Need == 0 || ns.Floor != 4*mib {
		t.Fatalf("a 7 MiB write with 10 MiB free = %v, want a NoSpaceError naming the write and the floor", err)
	}
	if _, err := m.KVGet(ctx, "ns", "b"); !errors.Is(err, cachestore.ErrNotFound) {
		t.Errorf("the refused write was written: %v", err)
	}
	d.free.Store(1 * mib)
	if _, err := s.KVGet(ctx, "ns", "a"); err != nil {
		t.Errorf("a read with 1 MiB free: %v", err)
	}
	if err := s.KVDelete(ctx, "ns", "a"); err != nil {
		t.Errorf("a deletion with 1 MiB free: %v", err)
	}
}

// TestVanishedFolder: a folder that cannot be checked refuses turns and
// writes, saying so, and reads go on.
func TestVanishedFolder(t *testing.T) {
	d := &disk{}
	d.free.Store(30 * mib)
	d.gone.Store(true)
	var log bytes.Buffer
	var changes []space.Status
	g := newGuard(t, d, &log, &changes)
	err := g.Admit()
	if !errors.Is(err, cachestore.ErrNoSpace) || !strings.Contains(err.Error(), "cannot be checked") {
		t.Fatalf("Admit of a vanished folder = %v", err)
	}
	st := g.Status()
	if !st.Low || st.Err == nil || !strings.Contains(st.Reason(), "/data") {
		t.Errorf("Status = %+v (%s)", st, st.Reason())
	}
	s := g.Wrap(cachestore.NewMemory())
	if err := s.KVPut(context.Background(), "ns", "a", []byte("v")); !errors.Is(err, cachestore.ErrNoSpace) {
		t.Errorf("a write to a vanished folder: %v", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []space.Options{{Reserve: 1}, {Dir: "d"}, {Dir: "d", Reserve: 1, Floor: 2}} {
		if _, err := space.New(o); err == nil {
			t.Errorf("New(%+v) took it", o)
		}
	}
}

// TestStatfs: without a Free function the guard asks the file system.
func TestStatfs(t *testing.T) {
	g, err := space.New(space.Options{Dir: t.TempDir(), Reserve: 1})
	if err != nil {
		t.Fatal(err)
	}
	if st := g.Status(); st.Err != nil || st.Free == 0 || st.Low {
		t.Errorf("Status of a temp dir = %+v", st)
	}
}
