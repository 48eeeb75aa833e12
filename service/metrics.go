package service

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Label values for tools the metrics do not name one by one.
const (
	// otherTool labels calls of names that are not registered tools (client
	// tools, unknown or malformed names), so a model cannot create series.
	otherTool = "other"
	// maxToolLabels bounds the tool names labelled one by one when the
	// metrics have no registry to check names against.
	maxToolLabels = 256
)

// Buckets of the histograms, in seconds.
var (
	waitBuckets    = []float64{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30}
	execBuckets    = []float64{0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120, 300}
	commitBuckets  = []float64{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5}
	confirmBuckets = []float64{0.1, 0.5, 1, 5, 15, 30, 60, 120, 300}
	httpBuckets    = []float64{0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120}
)

// Metrics is the service's Prometheus registry (its own, never the default
// one) and the dispatcher's toolkit.Observer. Safe for concurrent use.
type Metrics struct {
	// immutable after NewMetrics
	reg   *prometheus.Registry
	tools *toolkit.Registry

	calls       *prometheus.CounterVec
	slotWait    prometheus.Histogram
	exec        *prometheus.HistogramVec
	commit      prometheus.Histogram
	confirmWait prometheus.Histogram
	inFlight    prometheus.Gauge
	cache       *prometheus.CounterVec
	abandoned   *prometheus.CounterVec
	injected    *prometheus.CounterVec
	injectedIO  *prometheus.CounterVec
	httpReqs    *prometheus.CounterVec
	httpDur     *prometheus.HistogramVec
	redirects   prometheus.Counter
	bodyBytes   prometheus.Gauge
	overBudget  prometheus.Counter
	noSpace     prometheus.Counter

	mu   sync.Mutex
	seen map[string]bool // guarded by mu: tool labels in use when tools is nil
}

var _ toolkit.Observer = (*Metrics)(nil)

// NewMetrics returns metrics registered on a new registry, with the Go and
// process collectors. Tool labels name the tools registered in tools; other
// names are labelled "other". With a nil tools, the first 256 names are
// labelled as they are.
func NewMetrics(tools *toolkit.Registry) *Metrics {
	m := &Metrics{
		reg:   prometheus.NewRegistry(),
		tools: tools,
		seen:  map[string]bool{},
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tooldispatch_calls_total", Help: "Calls by tool and final status.",
		}, []string{"tool", "status"}),
		slotWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "tooldispatch_slot_wait_seconds", Help: "How long calls waited for a concurrency slot.", Buckets: waitBuckets,
		}),
		exec: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tooldispatch_exec_seconds", Help: "How long calls ran, by tool.", Buckets: execBuckets,
		}, []string{"tool"}),
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "tooldispatch_commit_seconds", Help: "How long a turn's commit took.", Buckets: commitBuckets,
		}),
		confirmWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "tooldispatch_confirm_wait_seconds", Help: "How long confirmations waited for an answer.", Buckets: confirmBuckets,
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tooldispatch_calls_in_flight", Help: "Calls running now.",
		}),
		cache: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tooldispatch_cache_requests_total", Help: "Result-cache lookups by tool and result (hit or miss).",
		}, []string{"tool", "result"}),
		injected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tooldispatch_injected_faults_total", Help: "Faults chaos mode injected, by tool and fault.",
		}, []string{"tool", "fault"}),
		injectedIO: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tooldispatch_injected_storage_faults_total", Help: "Storage faults chaos mode injected, by store operation and fault.",
		}, []string{"op", "fault"}),
		abandoned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tooldispatch_abandoned_calls_total", Help: "Calls abandoned because they ignored their context.",
		}, []string{"tool"}),
		httpReqs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tooldispatch_http_requests_total", Help: "HTTP requests by route and status code.",
		}, []string{"route", "code"}),
		httpDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tooldispatch_http_request_duration_seconds", Help: "HTTP request durations by route (streams last as long as they are open).", Buckets: httpBuckets,
		}, []string{"route"}),
		bodyBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tooldispatch_request_bytes_in_flight", Help: "Bytes of request bodies (turns, answers) read and not yet answered: the in-flight budget in use.",
		}),
		overBudget: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tooldispatch_requests_over_budget_total", Help: "Requests refused (429) because their body did not fit the in-flight budget.",
		}),
		noSpace: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tooldispatch_turns_refused_no_space_total", Help: "Turns answered 507 because the store's disk was below its free-space reserve.",
		}),
		// Registered by a cluster member's server only (observeCluster).
		redirects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tooldispatch_cluster_redirects_total", Help: "Session requests answered 307 to the member owning the session.",
		}),
	}
	// The dispatcher reports each abandoned call through Observer.Abandoned
	// (the counter above); whether its tool has returned since is known
	// only to actors.AbandonedCalls, read at each scrape.
	abandonedRunning := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tooldispatch_abandoned_calls_running",
		Help: "Abandoned calls of this process whose tool has not returned yet (their goroutines still run).",
	}, func() float64 {
		_, running := actors.AbandonedCalls()
		return float64(running)
	})
	m.reg.MustRegister(m.calls, m.slotWait, m.exec, m.commit, m.confirmWait, m.inFlight,
		m.cache, m.abandoned, abandonedRunning, m.injected, m.injectedIO, m.httpReqs, m.httpDur, m.bodyBytes, m.overBudget, m.noSpace,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// bodyBytesInFlight reports the in-flight budget in use.
func (m *Metrics) bodyBytesInFlight(n int64) { m.bodyBytes.Set(float64(n)) }

// Registry returns the registry the metrics are registered on, for adding
// collectors of the embedding program.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// toolLabel bounds the tool label's values.
func (m *Metrics) toolLabel(name string) string {
	if m.tools != nil {
		if _, ok := m.tools.Lookup(name); ok {
			return name
		}
		return otherTool
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen[name] {
		return name
	}
	if len(m.seen) >= maxToolLabels || len(name) > 64 {
		return otherTool
	}
	m.seen[name] = true
	return name
}

// SlotWait implements toolkit.Observer.
func (m *Metrics) SlotWait(_ string, d time.Duration) { m.slotWait.Observe(d.Seconds()) }

// Executed implements toolkit.Observer.
func (m *Metrics) Executed(tool, _ string, d time.Duration) {
	m.exec.WithLabelValues(m.toolLabel(tool)).Observe(d.Seconds())
}

// CallDone implements toolkit.Observer.
func (m *Metrics) CallDone(tool, status string) {
	if status == string(toolkit.StatusUnknownTool) {
		tool = otherTool
	}
	m.calls.WithLabelValues(m.toolLabel(tool), status).Inc()
}

// Committed implements toolkit.Observer.
func (m *Metrics) Committed(_ int, d time.Duration) { m.commit.Observe(d.Seconds()) }

// ConfirmWait implements toolkit.Observer.
func (m *Metrics) ConfirmWait(_ string, _ bool, d time.Duration) { m.confirmWait.Observe(d.Seconds()) }

// InFlight implements toolkit.Observer.
func (m *Metrics) InFlight(delta int) { m.inFlight.Add(float64(delta)) }

// Cache implements toolkit.Observer.
func (m *Metrics) Cache(tool string, hit bool) {
	result := "miss"
	if hit {
		result = "hit"
	}
	m.cache.WithLabelValues(m.toolLabel(tool), result).Inc()
}

// Injected implements toolkit.Observer.
func (m *Metrics) Injected(tool, fault string) {
	m.injected.WithLabelValues(m.toolLabel(tool), fault).Inc()
}

// InjectedStorage counts a storage fault chaos mode injected into a store
// operation (op is its name, as "commit"; fault its kind).
func (m *Metrics) InjectedStorage(op, fault string) {
	m.injectedIO.WithLabelValues(op, fault).Inc()
}

// Abandoned implements toolkit.Observer.
func (m *Metrics) Abandoned(tool string) { m.abandoned.WithLabelValues(m.toolLabel(tool)).Inc() }

// observeHTTP counts one HTTP request.
func (m *Metrics) observeHTTP(route string, code int, d time.Duration) {
	m.httpReqs.WithLabelValues(route, strconv.Itoa(code)).Inc()
	m.httpDur.WithLabelValues(route).Observe(d.Seconds())
}
