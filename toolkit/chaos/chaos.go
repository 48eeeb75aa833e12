package chaos

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Fault kinds.
const (
	KindError    = "error"    // fail with Text
	KindTimeout  = "timeout"  // report a timeout without running
	KindLatency  = "latency"  // wait, then run the tool
	KindTruncate = "truncate" // run, then keep the first Fraction of the output
	KindGarble   = "garble"   // run, then scramble the output
	KindEmpty    = "empty"    // run, then return empty output
	KindHTTP     = "http"     // an HTTP tool sees Status (429, 500, 503) without running
	KindDeny     = "deny"     // the confirmation is denied as if a person had
)

// Fault is one fault a rule may inject.
type Fault struct {
	Kind        string  `toml:"kind" json:"kind"`
	Probability float64 `toml:"probability" json:"probability"`
	// Text of an error fault (default "injected failure").
	Text string `toml:"text" json:"text,omitempty"`
	// Status of an http fault: 429, 500 or 503.
	Status int `toml:"status" json:"status,omitempty"`
	// Latency: fixed Delay, or uniform between Min and Max.
	Delay Duration `toml:"delay" json:"delay,omitempty"`
	Min   Duration `toml:"min" json:"min,omitempty"`
	Max   Duration `toml:"max" json:"max,omitempty"`
	// Fraction of the output a truncate fault keeps (default 0.5).
	Fraction float64 `toml:"fraction" json:"fraction,omitempty"`
}

// Rule matches tools by name or glob (`mcp__*`, `fetch_page`) and lists the
// faults it may inject; at most one fault is drawn per call, with the
// faults' probabilities (their sum must be at most 1).
type Rule struct {
	Tools  []string `toml:"tools" json:"tools"`
	Faults []Fault  `toml:"faults" json:"faults"`
}

// Policy is a seeded chaos policy. The zero Policy injects nothing.
type Policy struct {
	Seed  uint64 `toml:"seed" json:"seed"`
	Rules []Rule `toml:"rules" json:"rules"`
	// Storage rules inject faults into store operations (storage.go). They
	// are the operator's: Parse, which reads a turn's policy, refuses them.
	Storage []StorageRule `toml:"storage" json:"storage,omitempty"`
}

// Duration is a time.Duration written as "250ms" in TOML and JSON.
type Duration struct{ time.Duration }

// UnmarshalText parses a Go duration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	d.Duration = v
	return err
}

// MarshalText writes a Go duration.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Load reads the operator's policy file (TOML, or JSON when it ends in
// .json). A key that is no field of the policy is refused, naming it.
func Load(file string) (*Policy, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	p := &Policy{}
	if strings.HasSuffix(file, ".json") {
		err = decodeJSON(b, p)
	} else {
		var md toml.MetaData
		if md, err = toml.Decode(string(b), p); err == nil {
			err = undecoded(md)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("chaos policy %s: %w", file, err)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("chaos policy %s: %w", file, err)
	}
	return p, nil
}

// Parse reads a turn's policy from JSON text (the run envelope and the
// service API). A key that is no field of the policy is refused, and so
// are storage rules: a turn may bring tool faults, never storage faults.
func Parse(text string) (*Policy, error) {
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	p := &Policy{}
	if err := decodeJSON([]byte(text), p); err != nil {
		return nil, fmt.Errorf("chaos policy: %w", err)
	}
	if len(p.Storage) > 0 {
		return nil, errors.New("chaos policy: storage faults are set by the operator only (--chaos FILE or [chaos] in the configuration); a turn's policy may hold tool rules only")
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("chaos policy: %w", err)
	}
	return p, nil
}

// decodeJSON decodes one JSON value into p, refusing unknown keys.
func decodeJSON(b []byte, p *Policy) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(p); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

// undecoded names the keys of a TOML document that are no field.
func undecoded(md toml.MetaData) error {
	und := md.Undecoded()
	if len(und) == 0 {
		return nil
	}
	keys := make([]string, len(und))
	for i, k := range und {
		keys[i] = k.String()
	}
	return fmt.Errorf("unknown keys: %s", strings.Join(keys, ", "))
}

// Validate names the first bad field.
func (p *Policy) Validate() error {
	for i, r := range p.Rules {
		if len(r.Tools) == 0 {
			return fmt.Errorf("rules[%d].tools: empty", i)
		}
		for _, g := range r.Tools {
			if _, err := path.Match(g, ""); err != nil {
				return fmt.Errorf("rules[%d].tools: bad glob %q", i, g)
			}
		}
		sum := 0.0
		for j, f := range r.Faults {
			where := fmt.Sprintf("rules[%d].faults[%d]", i, j)
			if f.Probability < 0 || f.Probability > 1 || math.IsNaN(f.Probability) {
				return fmt.Errorf("%s.probability must be within 0 and 1", where)
			}
			sum += f.Probability
			switch f.Kind {
			case KindError, KindTimeout, KindGarble, KindEmpty, KindDeny:
			case KindLatency:
				if f.Delay.Duration <= 0 && (f.Max.Duration <= 0 || f.Min.Duration > f.Max.Duration) {
					return fmt.Errorf("%s: latency needs delay, or min <= max", where)
				}
			case KindTruncate:
				if f.Fraction < 0 || f.Fraction >= 1 {
					return fmt.Errorf("%s.fraction must be within 0 and 1", where)
				}
			case KindHTTP:
				if f.Status != 429 && f.Status != 500 && f.Status != 503 {
					return fmt.Errorf("%s.status must be 429, 500 or 503", where)
				}
			default:
				return fmt.Errorf("%s.kind %q is not one of error, timeout, latency, truncate, garble, empty, http, deny", where, f.Kind)
			}
		}
		if sum > 1+1e-9 {
			return fmt.Errorf("rules[%d]: probabilities add up to %.3f, more than 1", i, sum)
		}
	}
	return p.validateStorage()
}

// Decision is the fault drawn for one call, or none.
type Decision struct {
	Fault *Fault
	// Latency to wait for a latency fault.
	Latency time.Duration
	// roll drives garbling deterministically.
	roll uint64
}

// Injected reports whether a fault was drawn.
func (d Decision) Injected() bool { return d.Fault != nil }

// Label is the value of the `injected` field: the fault's kind, with the
// HTTP status for http faults.
func (d Decision) Label() string {
	if d.Fault == nil {
		return ""
	}
	if d.Fault.Kind == KindHTTP {
		return fmt.Sprintf("http_%d", d.Fault.Status)
	}
	return d.Fault.Kind
}

// Decide draws the fault of the call at (turn, index) of run for tool: the
// first rule matching the tool decides. The same inputs always give the
// same decision.
func (p *Policy) Decide(run string, turn int64, index int, tool string) Decision {
	if p == nil {
		return Decision{}
	}
	for ri, r := range p.Rules {
		if !matches(r.Tools, tool) {
			continue
		}
		u, roll := p.uniform(run, turn, index, ri)
		acc := 0.0
		for i := range r.Faults {
			f := &r.Faults[i]
			acc += f.Probability
			if u < acc {
				d := Decision{Fault: f, roll: roll}
				if f.Kind == KindLatency {
					d.Latency = f.Delay.Duration
					if d.Latency <= 0 {
						span := f.Max.Duration - f.Min.Duration
						d.Latency = f.Min.Duration + time.Duration(float64(span)*unit(roll))
					}
				}
				return d
			}
		}
		return Decision{}
	}
	return Decision{}
}

func matches(globs []string, tool string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, tool); ok {
			return true
		}
	}
	return false
}

// uniform derives a number in [0,1) and a second roll from the seed, the
// run, the call's position and the rule.
func (p *Policy) uniform(run string, turn int64, index, rule int) (float64, uint64) {
	h := sha256.New()
	var buf [8]byte
	binary.LittleEndian.PutUint64(buf[:], p.Seed)
	h.Write(buf[:])
	h.Write([]byte(run))
	h.Write([]byte{0})
	binary.LittleEndian.PutUint64(buf[:], uint64(turn))
	h.Write(buf[:])
	binary.LittleEndian.PutUint64(buf[:], uint64(index))
	h.Write(buf[:])
	binary.LittleEndian.PutUint64(buf[:], uint64(rule))
	h.Write(buf[:])
	sum := h.Sum(nil)
	return unit(binary.LittleEndian.Uint64(sum[:8])), binary.LittleEndian.Uint64(sum[8:16])
}

func unit(x uint64) float64 { return float64(x>>11) / (1 << 53) }

// ErrInjected marks the error of an injected error, timeout or http fault.
var ErrInjected = errors.New("injected by chaos mode")

// RunsTool reports whether the tool still runs under this decision
// (latency, truncate, garble and empty alter a real run; the others replace
// it, so a mutating tool never runs and then "fails").
func (d Decision) RunsTool() bool {
	if d.Fault == nil {
		return true
	}
	switch d.Fault.Kind {
	case KindLatency, KindTruncate, KindGarble, KindEmpty:
		return true
	}
	return false
}

// Replacement returns the result text of a fault that replaces the run.
func (d Decision) Replacement(timeout time.Duration) string {
	switch d.Fault.Kind {
	case KindTimeout:
		return fmt.Sprintf("timed out after %s (injected by chaos mode)", timeout)
	case KindHTTP:
		text := map[int]string{429: "429 Too Many Requests", 500: "500 Internal Server Error", 503: "503 Service Unavailable"}[d.Fault.Status]
		return "HTTP " + text + " (injected by chaos mode)"
	case KindDeny:
		return "denied by the user (injected by chaos mode)"
	}
	text := d.Fault.Text
	if text == "" {
		text = "injected failure"
	}
	return text + " (injected by chaos mode)"
}

// Alter changes the output of a real run for truncate, garble and empty.
func (d Decision) Alter(out string) string {
	switch {
	case d.Fault == nil:
		return out
	case d.Fault.Kind == KindEmpty:
		return ""
	case d.Fault.Kind == KindTruncate:
		frac := d.Fault.Fraction
		if frac == 0 {
			frac = 0.5
		}
		// The output is redacted already: never cut inside a marker.
		return out[:toolkit.SafeCut(out, int(float64(len(out))*frac))]
	case d.Fault.Kind == KindGarble:
		b := []byte(out)
		x := d.roll | 1
		for i := range b {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			if x%4 == 0 && b[i] >= 0x21 && b[i] < 0x7f {
				b[i] = byte(0x21 + x%94)
			}
		}
		return string(b)
	}
	return out
}
