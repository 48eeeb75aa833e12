package toolkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
)

// convertedFormats are the formats whose conversion inlines $refs.
var convertedFormats = []ToolsFormat{ToolsOpenAIStrict, ToolsResponses, ToolsAnthropic, ToolsGemini}

// refChain is a schema of n definitions, each with k properties that all
// point at the next definition, the last one's properties strings: k^n
// copies once inlined, from a few KB of JSON.
func refChain(n, k int) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{"root":{"$ref":"#/$defs/d0"}},"$defs":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"d%d":{"type":"object","properties":{`, i)
		for j := range k {
			if j > 0 {
				b.WriteByte(',')
			}
			if i == n-1 {
				fmt.Fprintf(&b, `"p%d":{"type":"string"}`, j)
			} else {
				fmt.Fprintf(&b, `"p%d":{"$ref":"#/$defs/d%d"}`, j, i+1)
			}
		}
		b.WriteString(`}}`)
	}
	b.WriteString(`}}`)
	return b.String()
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// maxConversionAlloc is what one conversion may allocate, whatever the
// schema.
const maxConversionAlloc = 50 << 20

// TestSchemaConversionBudget: a schema of a few KB whose $refs would
// inline to millions of nodes (the chain of 7 definitions of 8 properties
// an MCP server may list) is refused in every converted format, naming
// the budget, after allocating at most 50 MB; find_tools gives it as its
// own schema with the reason (not_in_format), the tools array leaves it
// out, and the strict view of a call's arguments leaves them as they are.
func TestSchemaConversionBudget(t *testing.T) {
	for _, sh := range []struct{ defs, props int }{{6, 8}, {7, 8}, {40, 2}} {
		schema := json.RawMessage(refChain(sh.defs, sh.props))
		t.Run(fmt.Sprintf("%dx%d", sh.defs, sh.props), func(t *testing.T) {
			for _, f := range convertedFormats {
				var out json.RawMessage
				var err error
				n := allocated(func() { out, err = ProviderSchema(schema, f) })
				var r *SchemaRefusal
				if !errors.As(err, &r) || !strings.Contains(r.Reason, "budget") {
					t.Errorf("%s: a %d-byte schema of %d definitions × %d properties gave %d bytes (%v), want a refusal naming the budget",
						f, len(schema), sh.defs, sh.props, len(out), err)
				}
				if n > maxConversionAlloc {
					t.Errorf("%s: the conversion allocated %d MB, want at most %d", f, n>>20, maxConversionAlloc>>20)
				}
			}
			reg := NewRegistry()
			RegisterMeta(reg)
			reg.Register(Tool{Name: "hostile", Description: "H.", Schema: schema, AlwaysInArray: true, ReadOnly: true,
				Handler: func(context.Context, *Call) (Result, error) { return Result{}, nil }})
			v, err := NewView(reg, "openai", nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range convertedFormats {
				fv := v.WithFormat(f)
				tool, _ := fv.Lookup("hostile")
				params, why := fv.FoundSchema(tool)
				if !strings.Contains(why, "budget") || string(params) != string(schema) {
					t.Errorf("%s: find_tools gives %d bytes, not_in_format %q; want the tool's own schema and the budget named", f, len(params), why)
				}
				_, refused := fv.ArrayIn(f)
				if len(refused) != 1 || refused[0].Name != "hostile" || !strings.Contains(refused[0].Reason, "budget") {
					t.Errorf("%s: the tools array refused %+v, want hostile for its budget", f, refused)
				}
				a, err := ParseArgs(`{"root":null}`, Limits{})
				if err != nil {
					t.Fatal(err)
				}
				got, err := fv.StrictArgs(tool, a, Limits{})
				if err != nil || string(got.Canonical) != `{"root":null}` {
					t.Errorf("%s: StrictArgs = %s, %v; want the arguments as they are", f, got.Canonical, err)
				}
			}
		})
	}
}

// refGraph is a random graph of definitions for the property test: each
// definition an object whose properties are scalars, $refs to other
// definitions (as themselves, as array items or in an anyOf beside
// null), or a $ref with a description beside it.
type refGraph struct {
	defs [][]refProp
}

type refProp struct {
	name  string
	kind  int // 0 scalar, 1 $ref, 2 items $ref, 3 anyOf [$ref, null], 4 $ref with a description
	to    int
	descr string
}

// genGraph draws a graph of shape: wide (many properties, few
// definitions), deep (long chains), shared (many references to the same
// definitions); cyclic lets a reference point back.
func genGraph(r *rand.Rand, shape string, cyclic bool) *refGraph {
	var n, maxProps int
	switch shape {
	case "wide":
		n, maxProps = 1+r.IntN(4), 1+r.IntN(60)
	case "deep":
		n, maxProps = 2+r.IntN(40), 1+r.IntN(3)
	default: // shared
		n, maxProps = 2+r.IntN(10), 1+r.IntN(12)
	}
	g := &refGraph{defs: make([][]refProp, n)}
	for i := range n {
		k := 1 + r.IntN(maxProps)
		for j := range k {
			p := refProp{name: fmt.Sprintf("p%d_%d", i, j), kind: r.IntN(5)}
			if i == n-1 && !cyclic {
				p.kind = 0
			}
			if p.kind != 0 {
				if cyclic && r.IntN(4) == 0 {
					p.to = r.IntN(i + 1)
				} else if i+1 < n && r.IntN(2) == 0 {
					p.to = i + 1 // a chain: each level multiplies
				} else if i+1 < n {
					p.to = i + 1 + r.IntN(n-i-1)
				} else {
					p.kind = 0
				}
			}
			if p.kind == 4 {
				p.descr = strings.Repeat("d", r.IntN(40))
			}
			g.defs[i] = append(g.defs[i], p)
		}
	}
	return g
}

// schema is the graph as a tool schema whose root points at d0.
func (g *refGraph) schema() string {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{"root":{"$ref":"#/$defs/d0"}},"required":["root"],"$defs":{`)
	for i, props := range g.defs {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"d%d":%s`, i, g.defJSON(props))
	}
	b.WriteString(`}}`)
	return b.String()
}

func (g *refGraph) defJSON(props []refProp) string {
	parts := make([]string, len(props))
	for j, p := range props {
		parts[j] = fmt.Sprintf(`"%s":%s`, p.name, p.schemaJSON())
	}
	return `{"type":"object","properties":{` + strings.Join(parts, ",") + `}}`
}

// schemaJSON is the property's schema.
func (p refProp) schemaJSON() string {
	ref := fmt.Sprintf(`{"$ref":"#/$defs/d%d"}`, p.to)
	switch p.kind {
	case 1:
		return ref
	case 2:
		return `{"type":"array","items":` + ref + `}`
	case 3:
		return `{"anyOf":[` + ref + `,{"type":"null"}]}`
	case 4:
		return fmt.Sprintf(`{"$ref":"#/$defs/d%d","description":"%s"}`, p.to, p.descr)
	}
	return `{"type":"string"}`
}

// inlinedLen is the length of the property's schema once inlined, ref
// the length of the definition it points at.
func (p refProp) inlinedLen(ref int) int {
	switch p.kind {
	case 1:
		return ref
	case 2:
		return len(`{"type":"array","items":}`) + ref
	case 3:
		return len(`{"anyOf":[,{"type":"null"}]}`) + ref
	case 4:
		// The definition with the description merged in, last.
		return ref + len(`,"description":""`) + len(p.descr)
	}
	return len(`{"type":"string"}`)
}

// inlinedSize is the length of the compact JSON of the root once every
// $ref is inlined, computed per definition without building it; -1 for a
// graph whose references from d0 come back to a definition (recursive).
func (g *refGraph) inlinedSize() int {
	const unseen, visiting = -3, -2
	size := make([]int, len(g.defs))
	for i := range size {
		size[i] = unseen
	}
	var def func(i int) int
	def = func(i int) int {
		switch size[i] {
		case visiting:
			return -1
		case unseen:
		default:
			return size[i]
		}
		size[i] = visiting
		n := len(`{"type":"object","properties":{}}`) + len(g.defs[i]) - 1
		for _, p := range g.defs[i] {
			ref := 0
			if p.kind != 0 {
				if ref = def(p.to); ref < 0 {
					return -1
				}
			}
			n = min(n+len(p.name)+3+p.inlinedLen(ref), 1<<40) // saturated: 3^40 copies do not fit an int
		}
		size[i] = n
		return n
	}
	d0 := def(0)
	if d0 < 0 {
		return -1
	}
	return len(`{"type":"object","properties":{"root":},"required":["root"]}`) + d0
}

// TestSchemaConversionBudgetProperty: over random reference graphs (wide,
// deep, shared; with and without cycles), each converted format either
// gives the schema, when it inlines to at most the budget, or refuses it,
// naming the budget when it would inline to more (a cycle: the recursion
// or the budget); every conversion allocates at most 50 MB and gives at
// most a small multiple of the budget.
func TestSchemaConversionBudgetProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(35, 2))
	iterations := 150
	if testing.Short() {
		iterations = 40
	}
	over, under := 0, 0
	for i := range iterations {
		shape := []string{"wide", "deep", "shared"}[i%3]
		g := genGraph(r, shape, i%5 == 4)
		schema := json.RawMessage(g.schema())
		want := g.inlinedSize()
		for _, f := range convertedFormats {
			var out json.RawMessage
			var err error
			n := allocated(func() { out, err = ProviderSchema(schema, f) })
			var refusal *SchemaRefusal
			refused := errors.As(err, &refusal)
			switch {
			case err != nil && !refused:
				t.Fatalf("graph %d (%s) as %s: %v", i, shape, f, err)
			case want < 0:
				if !refused || !(strings.Contains(refusal.Reason, "refers to itself") || strings.Contains(refusal.Reason, "budget") ||
					strings.Contains(refusal.Reason, "deeper than")) {
					t.Errorf("graph %d (%s, recursive) as %s: %d bytes, %v; want it refused", i, shape, f, len(out), err)
				}
			case want <= maxInlinedBytes:
				if refused && !strings.Contains(refusal.Reason, "deeper than") {
					t.Errorf("graph %d (%s) inlines to %d bytes, within the budget, but %s refuses it: %v", i, shape, want, f, err)
				}
				if f == ToolsAnthropic && err == nil && len(out) != want {
					t.Errorf("graph %d (%s): the inlined schema has %d bytes, the model says %d", i, shape, len(out), want)
				}
			default:
				if !refused || !(strings.Contains(refusal.Reason, "budget") || strings.Contains(refusal.Reason, "deeper than")) {
					t.Errorf("graph %d (%s) inlines to %d bytes, over the budget, but %s gives %d bytes (%v)", i, shape, want, f, len(out), err)
				}
			}
			if n > maxConversionAlloc {
				t.Errorf("graph %d (%s) as %s allocated %d MB", i, shape, f, n>>20)
			}
			if len(out) > 4*maxInlinedBytes {
				t.Errorf("graph %d (%s) as %s gave %d bytes, more than 4 times the budget", i, shape, f, len(out))
			}
		}
		if want > maxInlinedBytes {
			over++
		} else if want >= 0 {
			under++
		}
	}
	t.Logf("%d graphs within the budget, %d over it", under, over)
	if over == 0 || under == 0 {
		t.Errorf("the generator drew %d graphs within the budget and %d over it; it must draw both", under, over)
	}
}

// TestSchemaConversionCostIsBounded: a schema within the budget costs
// about its size to convert, whatever its shape: a definition carrying
// unused $defs of its own, referenced from a thousand places, is not
// copied whole for each reference; an object of 11 000 keywords the
// format drops is not rebuilt once per keyword.
func TestSchemaConversionCostIsBounded(t *testing.T) {
	var shared strings.Builder
	shared.WriteString(`{"type":"object","properties":{`)
	for i := range 1500 {
		if i > 0 {
			shared.WriteByte(',')
		}
		fmt.Fprintf(&shared, `"p%d":{"$ref":"#/$defs/a"}`, i)
	}
	shared.WriteString(`},"$defs":{"a":{"type":"string","$defs":{"big":{"enum":[` +
		strings.Repeat("1,", 30000) + `1]}}}}}`)
	var wide strings.Builder
	wide.WriteString(`{"type":"object","properties":{"a":{"type":"string"}}`)
	for i := range 11000 {
		fmt.Fprintf(&wide, `,"x%d":0`, i)
	}
	wide.WriteString(`}`)
	for name, schema := range map[string]string{"shared": shared.String(), "wide": wide.String()} {
		for _, f := range convertedFormats {
			var err error
			n := allocated(func() { _, err = ProviderSchema(json.RawMessage(schema), f) })
			if err != nil {
				t.Errorf("%s (%d bytes) as %s: %v", name, len(schema), f, err)
			}
			if n > maxConversionAlloc {
				t.Errorf("%s (%d bytes) as %s allocated %d MB, want at most %d", name, len(schema), f, n>>20, maxConversionAlloc>>20)
			}
		}
	}
}

// BenchmarkSchemaConversionBudget: the cost of one conversion at the
// budget's edges, in each converted format: the 2 KB chain of 7
// definitions × 8 properties (refused) and a chain of 4 × 8 that inlines
// to 116 KB (just under the budget, given). MB/op is what the conversion
// allocates; out-KB the schema given.
func BenchmarkSchemaConversionBudget(b *testing.B) {
	for _, c := range []struct {
		name   string
		schema json.RawMessage
	}{{"refused-7x8", json.RawMessage(refChain(7, 8))}, {"given-4x8", json.RawMessage(refChain(4, 8))}} {
		for _, f := range convertedFormats {
			b.Run(c.name+"/"+string(f), func(b *testing.B) {
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				var out json.RawMessage
				for b.Loop() {
					out, _ = ProviderSchema(c.schema, f)
				}
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/1e6, "MB/op")
				b.ReportMetric(float64(len(out))/1e3, "out-KB")
			})
		}
	}
}
