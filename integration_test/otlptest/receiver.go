// Package otlptest is an OpenTelemetry trace receiver for tests: an HTTP
// server on loopback that speaks OTLP/HTTP as a collector does (a protobuf
// ExportTraceServiceRequest POSTed to /v1/traces, gzip or not, answered
// with an ExportTraceServiceResponse) and keeps every span it receives. Tree
// prints one trace as a tree.
//
// It knows nothing of tooldispatch: tests of any package use it.
package otlptest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, its ids in hex and its attributes as text.
type Span struct {
	TraceID, SpanID, ParentID string
	Name                      string
	Kind                      string
	Start, End                uint64 // unix nanoseconds
	Attrs                     map[string]string
	// Resource holds the resource's attributes (service.name, …).
	Resource map[string]string
	Scope    string
	// StatusCode is "STATUS_CODE_UNSET", "STATUS_CODE_OK" or "STATUS_CODE_ERROR".
	StatusCode    string
	StatusMessage string
}

// Receiver is the server. Safe for concurrent use.
type Receiver struct {
	srv *httptest.Server

	mu      sync.Mutex
	spans   []Span        // guarded by mu
	changed chan struct{} // guarded by mu: closed when spans grow
	bad     []string      // guarded by mu: requests it refused
}

// Start starts a receiver; Close stops it.
func Start() *Receiver {
	r := &Receiver{changed: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.export)
	r.srv = httptest.NewServer(mux)
	return r
}

// URL is the receiver's base URL (OTEL_EXPORTER_OTLP_ENDPOINT).
func (r *Receiver) URL() string { return r.srv.URL }

// TracesURL is the receiver's traces URL (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT).
func (r *Receiver) TracesURL() string { return r.srv.URL + "/v1/traces" }

// Close stops the server.
func (r *Receiver) Close() { r.srv.Close() }

func (r *Receiver) refuse(w http.ResponseWriter, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.bad = append(r.bad, msg)
	r.mu.Unlock()
	http.Error(w, msg, http.StatusBadRequest)
}

func (r *Receiver) export(w http.ResponseWriter, req *http.Request) {
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		r.refuse(w, "content type %q, want application/x-protobuf", ct)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			r.refuse(w, "gzip: %v", err)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		r.refuse(w, "reading: %v", err)
		return
	}
	var in coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &in); err != nil {
		r.refuse(w, "decoding ExportTraceServiceRequest: %v", err)
		return
	}
	var got []Span
	for _, rs := range in.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				got = append(got, Span{
					TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentID: hex.EncodeToString(s.GetParentSpanId()), Name: s.GetName(), Kind: s.GetKind().String(),
					Start: s.GetStartTimeUnixNano(), End: s.GetEndTimeUnixNano(), Attrs: attrs(s.GetAttributes()),
					Resource: res, Scope: ss.GetScope().GetName(),
					StatusCode: s.GetStatus().GetCode().String(), StatusMessage: s.GetStatus().GetMessage(),
				})
			}
		}
	}
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = value(kv.GetValue())
	}
	return m
}

func value(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	}
	return v.String()
}

// Spans returns a copy of the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// Refused returns what the receiver refused (bad requests), if anything.
func (r *Receiver) Refused() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.bad)
}

// WaitFor waits until ok holds for the spans received, or ctx ends; it
// returns the spans it last saw.
func (r *Receiver) WaitFor(ctx context.Context, ok func([]Span) bool) ([]Span, error) {
	for {
		r.mu.Lock()
		spans, changed := slices.Clone(r.spans), r.changed
		r.mu.Unlock()
		if ok(spans) {
			return spans, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return spans, ctx.Err()
		}
	}
}

// Named returns the spans called name.
func Named(spans []Span, name string) []Span {
	var out []Span
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// Trace returns the spans of one trace.
func Trace(spans []Span, traceID string) []Span {
	var out []Span
	for _, s := range spans {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	return out
}

// Tree prints the spans of one trace as a tree, children in start order,
// each span with the values of the attribute keys in show that it has (a
// key may also name a resource attribute). A span whose parent is not
// among them is a root.
func Tree(spans []Span, show ...string) string {
	byID := map[string]bool{}
	for _, s := range spans {
		byID[s.SpanID] = true
	}
	children := map[string][]Span{}
	var roots []Span
	for _, s := range spans {
		if s.ParentID == "" || !byID[s.ParentID] {
			roots = append(roots, s)
			continue
		}
		children[s.ParentID] = append(children[s.ParentID], s)
	}
	byStart := func(a, b Span) int {
		if a.Start != b.Start {
			if a.Start < b.Start {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	}
	var b bytes.Buffer
	var walk func(s Span, prefix string, last, root bool)
	walk = func(s Span, prefix string, last, root bool) {
		branch, next := "├─ ", "│  "
		if last {
			branch, next = "└─ ", "   "
		}
		if root {
			branch, next = "", ""
		}
		b.WriteString(prefix + branch + s.Name)
		for _, k := range show {
			v, ok := s.Attrs[k]
			if !ok {
				v, ok = s.Resource[k]
			}
			if ok {
				fmt.Fprintf(&b, " %s=%s", k, v)
			}
		}
		if s.StatusCode == "STATUS_CODE_ERROR" {
			b.WriteString(" [error]")
		}
		b.WriteString("\n")
		kids := children[s.SpanID]
		slices.SortFunc(kids, byStart)
		for i, c := range kids {
			walk(c, prefix+next, i == len(kids)-1, false)
		}
	}
	slices.SortFunc(roots, byStart)
	for _, r := range roots {
		walk(r, "", true, true)
	}
	return b.String()
}
