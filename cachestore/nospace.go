package cachestore

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// NoSpaceError is the ErrNoSpace of a store whose data folder is low on
// space: what a refused turn or write is told. Its message names the
// folder, the space free and the reserve.
type NoSpaceError struct {
	// Dir is the data folder whose file system is low.
	Dir string
	// Free is what the file system has free for the store, in bytes (less
	// what writes under way will take).
	Free uint64
	// Reserve is the free space below which no new turn is taken.
	Reserve uint64
	// Need is what the refused write needed besides the floor below which
	// no write is made (0 for a refused turn).
	Need uint64
	// Floor is the free space no write may take (0 for a refused turn).
	Floor uint64
}

func (e *NoSpaceError) Error() string {
	if e.Need == 0 && e.Floor == 0 {
		return fmt.Sprintf("no space for the store: the data folder %s has %s free, below the reserve of %s; "+
			"new turns are refused until space is freed (reads go on)", e.Dir, size(e.Free), size(e.Reserve))
	}
	return fmt.Sprintf("no space for the store: the data folder %s has %s free; a write of %s would leave less than the %s "+
		"the store keeps for itself (the reserve for new turns is %s); nothing of it was written",
		e.Dir, size(e.Free), size(e.Need), size(e.Floor), size(e.Reserve))
}

// Is makes errors.Is(err, ErrNoSpace) true.
func (e *NoSpaceError) Is(target error) bool { return target == ErrNoSpace }

// size writes n in binary units, cut (never rounded up) to two decimals:
// "19.96 MiB", "20 MiB", "512 B". A size just below a limit never reads as
// the limit.
func size(n uint64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatUint(n, 10) + " B"
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	hi, lo := bits.Mul64(n, 100)
	hundredths, _ := bits.Div64(hi, lo, div)
	s := strconv.FormatUint(hundredths/100, 10)
	if frac := hundredths % 100; frac != 0 {
		s += strings.TrimRight(fmt.Sprintf(".%02d", frac), "0")
	}
	return s + " " + string("KMGTPE"[exp]) + "iB"
}

// Size writes a byte count as the store's messages do ("19.96 MiB").
func Size(n uint64) string { return size(n) }
