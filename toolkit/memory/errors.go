package memory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Timeouts and bounds of the error-memory tools.
const (
	writeErrorTimeout   = 10 * time.Second
	errorHistoryTimeout = 10 * time.Second

	defaultHistoryLimit = 10
	maxHistoryLimit     = 50
	// listFieldBytes clips each field of a record in a list; reading one
	// record by id shows it whole.
	listFieldBytes = 300
	// maxPastFixes is how many fixes PastFixes returns at most.
	maxPastFixes = 3
	// Lengths of the parts of a PastFixes line.
	fixSymptomBytes = 80
	fixActionBytes  = 160
)

func (m *Memory) writeErrorTool() toolkit.Tool {
	return toolkit.Tool{
		Name: "write_error",
		Description: "Record an error you met and what you did about it, in the error memory. After you " +
			"get past a failed call another way, record the fix with outcome \"resolved\": it is shown the next time " +
			"that tool fails with a similar error, and error_history finds it. Record dead ends too (outcome \"failed\" " +
			"or \"abandoned\") so they are not tried again. Returns the record's id (E1, E2, …).",
		Schema: toolkit.SchemaLiteral(`{
			"type": "object",
			"properties": {
				"tool": {
					"type": "string",
					"description": "Name of the tool whose call failed, e.g. read_files or run_command.",
					"minLength": 1,
					"maxLength": 64
				},
				"symptom": {
					"type": "string",
					"description": "What went wrong, with the key words of the error message (e.g. \"permission denied opening config.yaml\").",
					"minLength": 1,
					"maxLength": 2000
				},
				"cause": {
					"type": "string",
					"description": "Why it happened, when you found out.",
					"maxLength": 2000
				},
				"action": {
					"type": "string",
					"description": "What you did: the fix that worked, or what you tried. Write it so that it can be followed next time.",
					"minLength": 1,
					"maxLength": 2000
				},
				"outcome": {
					"type": "string",
					"description": "resolved: the action fixed it; failed: the action did not help; abandoned: you gave up on this route.",
					"enum": ["resolved", "failed", "abandoned"]
				},
				"tags": {
					"type": "array",
					"description": "Optional short labels to find the record by (e.g. permissions, network, go-build).",
					"items": {"type": "string", "minLength": 1, "maxLength": 40},
					"maxItems": 10
				}
			},
			"required": ["tool", "symptom", "action", "outcome"],
			"additionalProperties": false
		}`),
		Concurrent: true,
		ReadOnly:   true,
		Timeout:    writeErrorTimeout,
		Handler:    m.writeError,
	}
}

func (m *Memory) writeError(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
	r := &record{
		Tool:    strings.TrimSpace(c.Args.String("tool")),
		Symptom: strings.TrimSpace(c.Args.String("symptom")),
		Cause:   strings.TrimSpace(c.Args.String("cause")),
		Action:  strings.TrimSpace(c.Args.String("action")),
		Outcome: c.Args.String("outcome"),
		Time:    m.now().UTC(),
		Session: c.Session,
		Run:     c.Run,
	}
	for _, t := range c.Args.Strings("tags") {
		if t = strings.TrimSpace(t); t != "" && !slices.Contains(r.Tags, t) {
			r.Tags = append(r.Tags, t)
		}
	}
	switch {
	case r.Tool == "":
		return toolkit.Result{}, errors.New("tool is empty: name the tool whose call failed")
	case r.Symptom == "":
		return toolkit.Result{}, errors.New("symptom is empty: say what went wrong")
	case r.Action == "":
		return toolkit.Result{}, errors.New("action is empty: say what you did about it")
	}
	switch r.Outcome {
	case OutcomeResolved, OutcomeFailed, OutcomeAbandoned:
	default:
		return toolkit.Result{}, fmt.Errorf("outcome is %q; use resolved, failed or abandoned", r.Outcome)
	}
	id, err := m.add(ctx, r)
	if err != nil {
		return toolkit.Result{}, err
	}
	msg := fmt.Sprintf("Recorded %s (%s, %s).", id, r.Tool, r.Outcome)
	if r.Outcome == OutcomeResolved {
		msg += fmt.Sprintf(" It will be suggested when %s fails with a similar error.", r.Tool)
	}
	return toolkit.Result{Content: msg}, nil
}

func (m *Memory) errorHistoryTool() toolkit.Tool {
	return toolkit.Tool{
		Name: "error_history",
		Description: "Search the error memory: errors met before and what fixed them (recorded with " +
			"write_error). Filter by tool and keywords of the error; resolved records come first. Give id to read one " +
			"record whole. Check it before digging into a failure that looks familiar.",
		Schema: toolkit.SchemaLiteral(`{
			"type": "object",
			"properties": {
				"tool": {
					"type": "string",
					"description": "Only records of this tool (e.g. run_command).",
					"maxLength": 64
				},
				"query": {
					"type": "string",
					"description": "Keywords of the error or fix to look for (e.g. \"permission denied config\"); matched against symptom, cause, action and tags.",
					"maxLength": 2000
				},
				"id": {
					"type": "string",
					"description": "Read one record whole by its id (e.g. E12); other arguments are then ignored.",
					"pattern": "^[Ee]?[0-9]{1,12}$"
				},
				"limit": {
					"type": "integer",
					"description": "Most records to return (default 10).",
					"minimum": 1,
					"maximum": 50
				}
			},
			"additionalProperties": false
		}`),
		Concurrent: true,
		ReadOnly:   true,
		Timeout:    errorHistoryTimeout,
		Handler:    m.errorHistory,
		// The memory grows during a run (write_error): every search runs.
		NoDedup: true,
	}
}

func (m *Memory) errorHistory(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
	if id := c.Args.String("id"); id != "" {
		r, err := m.lookup(ctx, id)
		if err != nil {
			return toolkit.Result{}, err
		}
		if r == nil || !m.visible(r, c.Session) {
			return toolkit.Result{}, fmt.Errorf("no record %s in %s", strings.ToUpper(id), m.memoryName())
		}
		var b strings.Builder
		writeRecord(&b, r, 0, c.Session)
		return toolkit.Result{Content: b.String()}, nil
	}
	recs, err := m.snapshot(ctx)
	if err != nil {
		return toolkit.Result{}, err
	}
	recs = m.visibleTo(recs, c.Session)
	tool := strings.TrimSpace(c.Args.String("tool"))
	query := c.Args.String("query")
	limit := int(min(max(c.Args.Int("limit", defaultHistoryLimit), 1), maxHistoryLimit))
	hits, total := search(recs, tool, keywords(query))

	var b strings.Builder
	scope := "recorded errors"
	if tool != "" {
		scope += " of " + tool
	}
	switch {
	case len(hits) == 0 && total == 0:
		fmt.Fprintf(&b, "No %s in %s.\n", scope, m.memoryName())
		return toolkit.Result{Content: b.String()}, nil
	case len(hits) == 0:
		fmt.Fprintf(&b, "None of the %d %s matches %q; try other keywords.\n", total, scope, strings.TrimSpace(query))
		return toolkit.Result{Content: b.String()}, nil
	}
	shown := hits[:min(limit, len(hits))]
	if strings.TrimSpace(query) != "" {
		fmt.Fprintf(&b, "%d of %d %s match %q", len(hits), total, scope, strings.TrimSpace(query))
	} else {
		fmt.Fprintf(&b, "%d %s", total, scope)
	}
	if len(shown) < len(hits) {
		fmt.Fprintf(&b, "; showing %d (resolved first, then the best matches, newest first)", len(shown))
	}
	b.WriteString(":\n")
	for _, r := range shown {
		b.WriteByte('\n')
		writeRecord(&b, r, listFieldBytes, c.Session)
	}
	return toolkit.Result{Content: b.String()}, nil
}

// search returns the records of tool (all tools when empty) matching the
// query keywords (all when none), best first: resolved records, then higher
// scores, then newer ones; total is how many records the tool filter kept.
func search(recs []*record, tool string, query []string) (hits []*record, total int) {
	type scored struct {
		r     *record
		score int
	}
	var found []scored
	for _, r := range recs {
		if tool != "" && !strings.EqualFold(r.Tool, tool) {
			continue
		}
		total++
		s := 0
		for _, k := range query {
			if r.symptomKW.has(k) {
				s += 3
			}
			if r.tagKW.has(k) {
				s += 3
			}
			if r.causeKW.has(k) {
				s += 2
			}
			if r.actionKW.has(k) {
				s++
			}
			if strings.EqualFold(r.Tool, k) {
				s += 2
			}
		}
		if len(query) > 0 && s == 0 {
			continue
		}
		found = append(found, scored{r, s})
	}
	slices.SortStableFunc(found, func(a, b scored) int {
		if ra, rb := a.r.Outcome == OutcomeResolved, b.r.Outcome == OutcomeResolved; ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		if a.score != b.score {
			return b.score - a.score
		}
		return cmp.Compare(b.r.Seq, a.r.Seq)
	})
	hits = make([]*record, len(found))
	for i, f := range found {
		hits[i] = f.r
	}
	return hits, total
}

// memoryName names the memory a call reads, for its texts.
func (m *Memory) memoryName() string {
	if m.scope == ScopeWorkspace {
		return "this workspace's error memory"
	}
	return "this session's error memory"
}

// writeRecord prints one record; clipAt > 0 clips each field to that many
// bytes on one line. A record written in another session than the
// reader's (a workspace-wide memory) says so.
func writeRecord(b *strings.Builder, r *record, clipAt int, reader string) {
	field := func(s string) string {
		if clipAt > 0 {
			return oneLine(s, clipAt)
		}
		return s
	}
	from := ""
	if r.Session != reader {
		from = " · recorded in another session"
	}
	fmt.Fprintf(b, "%s [%s] %s · %s%s\n", r.id(), r.Outcome, r.Tool, r.Time.Format(time.DateOnly), from)
	fmt.Fprintf(b, "  symptom: %s\n", field(r.Symptom))
	if r.Cause != "" {
		fmt.Fprintf(b, "  cause: %s\n", field(r.Cause))
	}
	fmt.Fprintf(b, "  action: %s\n", field(r.Action))
	if len(r.Tags) > 0 {
		fmt.Fprintf(b, "  tags: %s\n", strings.Join(r.Tags, ", "))
	}
}

// PastFixes returns up to three one-line summaries of the resolved records
// session reads (Scope) of tool whose symptom shares keywords with errText,
// best match first, symptom and action quoted (they are a model's words,
// not instructions), e.g.
//
//	E12 (read_files): "permission denied" → "run chmod via run_command first"
//
// A record from another session (ScopeWorkspace) is marked "from another
// session". It returns nil when nothing matches (or the store cannot be
// read: a lookup that fails must not change the failed call's result).
// After the first call it works from the in-memory cache. Its signature
// fits actors.Config.PastFixes.
func (m *Memory) PastFixes(ctx context.Context, session, tool, errText string) []string {
	recs, err := m.snapshot(ctx)
	if err != nil || len(recs) == 0 {
		return nil
	}
	recs = m.visibleTo(recs, session)
	errKW := newKeywordSet(errText)
	if len(errKW) == 0 {
		return nil
	}
	type scored struct {
		r      *record
		shared int
		frac   float64
	}
	better := func(a, b scored) bool {
		switch {
		case a.shared != b.shared:
			return a.shared > b.shared
		case a.frac != b.frac:
			return a.frac > b.frac
		}
		return a.r.Seq > b.r.Seq
	}
	// The best maxPastFixes, best first, kept as the records go by.
	found := make([]scored, 0, maxPastFixes+1)
	for _, r := range recs {
		if r.Outcome != OutcomeResolved || !strings.EqualFold(r.Tool, tool) || len(r.symptomKW) == 0 {
			continue
		}
		shared := 0
		for k := range r.symptomKW {
			if errKW[k] {
				shared++
			}
		}
		frac := float64(shared) / float64(len(r.symptomKW))
		// Relevant: several words in common, or one that is at least half
		// of what the symptom says.
		if shared < 2 && (shared == 0 || frac < 0.5) {
			continue
		}
		s := scored{r, shared, frac}
		i := len(found)
		for i > 0 && better(s, found[i-1]) {
			i--
		}
		if i < maxPastFixes {
			found = slices.Insert(found, i, s)[:min(len(found)+1, maxPastFixes)]
		}
	}
	if len(found) == 0 {
		return nil
	}
	out := make([]string, 0, len(found))
	for _, f := range found {
		from := ""
		if f.r.Session != session {
			from = ", from another session"
		}
		out = append(out, fmt.Sprintf("%s (%s%s): %q → %q", f.r.id(), f.r.Tool, from, oneLine(f.r.Symptom, fixSymptomBytes), oneLine(f.r.Action, fixActionBytes)))
	}
	return out
}
