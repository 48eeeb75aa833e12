package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	protocluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/rs/zerolog"
)

// Static membership: every member answers membership checks on its own
// port and checks every listed member's, so each computes the same member
// list from the same answers.
const (
	// staticInterval is how often each listed member is checked.
	staticInterval = 200 * time.Millisecond
	// staticCheckTimeout bounds one check.
	staticCheckTimeout = time.Second
	// staticSuspect is how long a member that stops answering (a
	// partition, a stopped process) stays in the list; one whose port
	// refuses connections (it died or left) is dropped at once.
	staticSuspect = 3 * time.Second
	// staticHealthPath is the route members check.
	staticHealthPath = "/_health"
)

// StaticOptions configures a static member list.
type StaticOptions struct {
	// Listen is the HOST:PORT this member answers membership checks on.
	Listen string
	// Peers are the HOST:PORT every member answers checks on (this
	// member's included).
	Peers []string
	// TLS: the checks run over mutual TLS with the cluster's
	// certificates; nil runs them over plain HTTP (for loopback only).
	TLS *TLS
	// Logger gets membership changes (Info; a member lost: Warn).
	Logger zerolog.Logger
}

// Validate names the first bad field.
func (o *StaticOptions) Validate() error {
	switch {
	case o.Listen == "":
		return errors.New("cluster: StaticOptions.Listen is required")
	case len(o.Peers) == 0:
		return errors.New("cluster: StaticOptions.Peers is required")
	}
	return nil
}

// staticNode is what a member answers a check with.
type staticNode struct {
	Cluster string   `json:"cluster"`
	ID      string   `json:"id"`
	Host    string   `json:"host"`
	Port    int      `json:"port"`
	Kinds   []string `json:"kinds"`
	Leaving bool     `json:"leaving,omitempty"`
	// Peers is the member's static list, sorted: members compare lists
	// so that a list changed on some members only is said.
	Peers []string `json:"peers,omitempty"`
}

// peerState is what a member knows of one listed member.
type peerState struct {
	node   *staticNode // last answer; nil until one came
	lastOK time.Time
	in     bool // in the member list
	// otherList is the differing list this peer answered last, said once
	// until it changes.
	otherList string
}

// Static is a protoactor cluster provider for a fixed list of members.
// Unlike protoactor's automanaged provider it listens only on the host it
// is given, runs its checks over mutual TLS when given certificates,
// drops a member whose port refuses connections at the next check, and
// logs membership changes rather than every failed check.
type Static struct {
	// immutable after NewStatic
	opts   StaticOptions
	ln     net.Listener
	client *http.Client
	scheme string

	mu      sync.Mutex
	c       *protocluster.Cluster // guarded by mu: set by StartMember
	self    *staticNode           // guarded by mu
	srv     *http.Server          // guarded by mu
	peers   map[string]*peerState // guarded by mu
	cancel  context.CancelFunc    // guarded by mu
	stopped bool                  // guarded by mu

	wg sync.WaitGroup
}

// NewStatic opens the membership port (opts.Listen) and returns the
// provider; it starts serving and checking when the cluster starts the
// member.
func NewStatic(opts StaticOptions) (*Static, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("cluster: membership port: %w", err)
	}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: staticCheckTimeout}).DialContext,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     30 * time.Second,
	}
	s := &Static{opts: opts, ln: ln, scheme: "http", peers: map[string]*peerState{}}
	if opts.TLS != nil {
		s.ln = &tlsListener{ln, opts.TLS}
		tr.TLSClientConfig = opts.TLS.Client.Clone()
		s.scheme = "https"
	}
	s.client = &http.Client{Transport: tr, Timeout: staticCheckTimeout}
	for _, p := range opts.Peers {
		s.peers[p] = &peerState{}
	}
	return s, nil
}

// Addr is the membership port's address.
func (s *Static) Addr() net.Addr { return s.ln.Addr() }

// StartMember serves this member's checks and starts checking the others.
func (s *Static) StartMember(c *protocluster.Cluster) error {
	host, port, err := c.ActorSystem.GetHostPort()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.mu.Lock()
	s.c = c
	s.self = &staticNode{Cluster: c.Config.Name, ID: c.ActorSystem.ID, Host: host, Port: port, Kinds: c.GetClusterKinds(), Peers: sortedList(s.opts.Peers)}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serveHealth), ReadHeaderTimeout: staticCheckTimeout, ErrorLog: nil}
	s.cancel = cancel
	srv := s.srv
	s.mu.Unlock()
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		_ = srv.Serve(s.ln)
	}()
	go func() {
		defer s.wg.Done()
		s.loop(ctx)
	}()
	return nil
}

// StartClient is not supported: every process of the cluster is a member.
func (s *Static) StartClient(*protocluster.Cluster) error {
	return errors.New("cluster: a static member list has members only")
}

// Shutdown stops answering checks (the others drop this member at their
// next check) and stops checking.
func (s *Static) Shutdown(bool) error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	srv, cancel := s.srv, s.cancel
	s.mu.Unlock()
	var err error
	if srv != nil {
		err = srv.Close()
		cancel()
	} else {
		err = s.ln.Close()
	}
	s.wg.Wait()
	s.client.CloseIdleConnections()
	return err
}

func (s *Static) serveHealth(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != staticHealthPath || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	self := *s.self
	self.Leaving = s.stopped
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(self)
}

// loop checks every listed member each staticInterval and hands the
// member list to the cluster.
func (s *Static) loop(ctx context.Context) {
	t := time.NewTicker(staticInterval)
	defer t.Stop()
	for {
		s.round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// checkResult is one check's outcome.
type checkResult struct {
	peer    string
	node    *staticNode
	refused bool // the port refused the connection, or the member is leaving
	err     error
}

// round checks every listed member once and updates the member list.
func (s *Static) round(ctx context.Context) {
	results := make(chan checkResult, len(s.opts.Peers))
	var wg sync.WaitGroup
	for _, p := range s.opts.Peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results <- s.check(ctx, p)
		}()
	}
	wg.Wait()
	close(results)
	if ctx.Err() != nil {
		return
	}
	now := time.Now()
	s.mu.Lock()
	c, self := s.c, s.self
	members := protocluster.Members{{Id: self.ID, Host: self.Host, Port: int32(self.Port), Kinds: self.Kinds}}
	seen := map[string]bool{self.ID: true}
	for r := range results {
		ps := s.peers[r.peer]
		switch {
		case r.err == nil && r.node.Cluster == self.Cluster:
			if ps.node == nil || ps.node.ID != r.node.ID {
				if ps.node != nil && ps.in && ps.node.ID != self.ID {
					s.opts.Logger.Info().Str("peer", r.peer).Msg("cluster member restarted")
				}
			}
			ps.node, ps.lastOK = r.node, now
			s.compareLists(r.peer, ps, r.node)
		case r.err == nil:
			ps.node = nil
			s.opts.Logger.Debug().Str("peer", r.peer).Str("cluster", r.node.Cluster).Msg("listed member belongs to another cluster")
		case r.refused:
			ps.node = nil
		default:
			if ps.node != nil && now.Sub(ps.lastOK) >= staticSuspect {
				ps.node = nil
			}
			s.opts.Logger.Debug().Str("peer", r.peer).Err(r.err).Msg("membership check failed")
		}
		in := ps.node != nil && ps.node.ID != self.ID
		if in && !seen[ps.node.ID] {
			seen[ps.node.ID] = true
			members = append(members, &protocluster.Member{Id: ps.node.ID, Host: ps.node.Host, Port: int32(ps.node.Port), Kinds: ps.node.Kinds})
		}
		switch {
		case in && !ps.in:
			s.opts.Logger.Info().Str("peer", r.peer).Msg("cluster member joined")
		case !in && ps.in && r.refused:
			s.opts.Logger.Info().Str("peer", r.peer).Msg("cluster member left (its port refuses connections)")
		case !in && ps.in:
			s.opts.Logger.Warn().Str("peer", r.peer).Err(r.err).Dur("unanswered", now.Sub(ps.lastOK)).Msg("cluster member lost: it stopped answering membership checks")
		}
		ps.in = in
	}
	stopped := s.stopped
	s.mu.Unlock()
	if !stopped {
		c.MemberList.UpdateClusterTopology(members)
	}
}

// compareLists says, once until it changes, that a listed member answers
// with another member list than this one's (a list changed on some
// members only: each places sessions over the members it counts, so two
// members may place one session differently until every list is the same;
// the store's fence keeps one writer per session). Called with s.mu held.
func (s *Static) compareLists(peer string, ps *peerState, n *staticNode) {
	if n.Peers == nil { // a member that does not say its list
		return
	}
	other := strings.Join(n.Peers, ",")
	if other == strings.Join(s.self.Peers, ",") {
		if ps.otherList != "" {
			s.opts.Logger.Info().Str("peer", peer).Msg("cluster member's list is this member's again")
		}
		ps.otherList = ""
		return
	}
	if other == ps.otherList {
		return
	}
	ps.otherList = other
	s.opts.Logger.Warn().Str("peer", peer).Str("its_peers", other).Str("these_peers", strings.Join(s.self.Peers, ",")).
		Msg("cluster member lists differ: until every member runs with the same --peers (restart each with the new list, one by one), " +
			"members may place a session on different members")
}

// sortedList returns the list sorted, without repeats.
func sortedList(l []string) []string {
	out := slices.Clone(l)
	slices.Sort(out)
	return slices.Compact(out)
}

// check asks one listed member for its node.
func (s *Static) check(ctx context.Context, peer string) checkResult {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.scheme+"://"+peer+staticHealthPath, nil)
	if err != nil {
		return checkResult{peer: peer, err: err}
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return checkResult{peer: peer, err: err, refused: errors.Is(err, syscall.ECONNREFUSED)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return checkResult{peer: peer, err: fmt.Errorf("status %d", resp.StatusCode)}
	}
	var n staticNode
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 64<<10)).Decode(&n); err != nil {
		return checkResult{peer: peer, err: err}
	}
	if n.Leaving {
		return checkResult{peer: peer, refused: true, err: errors.New("leaving")}
	}
	return checkResult{peer: peer, node: &n}
}
