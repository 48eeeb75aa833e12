package service

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tooldispatch/tooldispatch/cachestore/space"
)

// spaceRetryAfter is what a turn refused for want of space is told to
// wait: space comes back when someone frees it, not at a known time.
const spaceRetryAfter = "60"

// admitSpace refuses a new turn when the store's disk is below its
// free-space reserve (Options.Space): 507 naming the folder, the free space
// and the reserve, before anything of the turn is read or run. It reports
// whether the turn may go on.
func (s *Server) admitSpace(w http.ResponseWriter, r *http.Request) bool {
	g := s.opts.Space
	if g == nil {
		return true
	}
	err := g.Admit()
	if err == nil {
		return true
	}
	s.opts.Metrics.noSpace.Inc()
	// Read (a little at a time) what the client sends before it reads the
	// answer, so that it gets the 507 and not a reset connection.
	drop(r.Body, s.opts.MaxBodyBytes)
	e := errorf(http.StatusInsufficientStorage, "%s; nothing ran", err.Error())
	e.retryAfter = spaceRetryAfter
	writeError(w, e)
	return false
}

// healthReply is what /healthz answers.
type healthReply struct {
	Status string `json:"status"`
	// Reason says why the service is degraded.
	Reason string `json:"reason,omitempty"`
}

// spaceHealth is the health of the store's disk: "" when the service may
// take turns, otherwise why not. detail names the folder and the sizes,
// for a caller allowed to see them (the token's holder; every caller when
// there is no token).
func (s *Server) spaceHealth(detail bool) string {
	g := s.opts.Space
	if g == nil {
		return ""
	}
	st := g.Status()
	switch {
	case !st.Low:
		return ""
	case detail:
		return st.Reason()
	case st.Err != nil:
		return "the data folder cannot be checked: new turns are refused"
	}
	return "the data folder is below its free-space reserve: new turns are refused"
}

// observeSpace registers the metrics of the store's free-space reserve.
func (m *Metrics) observeSpace(g *space.Guard) {
	_ = m.reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tooldispatch_store_free_bytes",
		Help: "Bytes free on the file system of the data folder (statfs, at each scrape).",
	}, func() float64 { return float64(g.Status().Free) }))
	_ = m.reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tooldispatch_store_reserve_bytes",
		Help: "The free-space reserve: below it new turns are refused (507).",
	}, func() float64 { return float64(g.Reserve()) }))
	_ = m.reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tooldispatch_store_space_low",
		Help: "1 while the data folder is below its free-space reserve or cannot be checked (new turns refused), else 0.",
	}, func() float64 {
		if g.Status().Low {
			return 1
		}
		return 0
	}))
}
