package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd"
	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"

	tdcluster "github.com/tooldispatch/tooldispatch/actors/cluster"
	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/postgres"
	"github.com/tooldispatch/tooldispatch/cmd/tooldispatch/belt"
	"github.com/tooldispatch/tooldispatch/toolkit/secrets"
)

const (
	// membershipTTL is how often static membership is checked.
	membershipTTL = time.Second
	// postgresOpenTimeout bounds connecting to the shared store at start.
	postgresOpenTimeout = 30 * time.Second
)

// clusterStore opens the shared PostgreSQL store and keeps the member's own
// Badger (local) for the 30-minute cache.
func clusterStore(o *options, local cachestore.Store, log zerolog.Logger) (cachestore.Store, error) {
	url := o.postgres
	if url == "" {
		url = os.Getenv("TOOLDISPATCH_PG_URL")
	}
	if url == "" {
		return nil, errors.New("--cluster needs --postgres URL (or $TOOLDISPATCH_PG_URL): the members share their sessions there")
	}
	ctx, cancel := context.WithTimeout(context.Background(), postgresOpenTimeout)
	defer cancel()
	pg, err := postgres.Open(ctx, postgres.Options{URL: url, Logger: log})
	if err != nil {
		return nil, err
	}
	return cachestore.Split{Store: pg, Local: local}, nil
}

// clusterTools points a member's tool belt at the shared store: secrets
// and the error memory (KV records) and chat_history's turns live in
// PostgreSQL and are read through (belt.Config.Shared), while the file
// versions stay in local, the member's own store, as they describe the
// member's own copy of the workspace. Without [secrets] key_file and
// TOOLDISPATCH_SECRET_KEY, the secrets' key is the one kept in the shared
// store (secrets.SharedKey: the first member draws it); with either, the
// operator hands every member the key, and the key check sealed in the
// shared store refuses a member whose key differs (clusterKeyError).
func clusterTools(bc *belt.Config, shared, local cachestore.Store, cfg *fileConfig, log zerolog.Logger) error {
	bc.Store, bc.Versions, bc.Shared = shared, local, true
	if cfg.Secrets.KeyFile != "" || strings.TrimSpace(os.Getenv(secrets.EnvKey)) != "" {
		return nil
	}
	kv, ok := shared.(secrets.KeyKV)
	if !ok {
		return errors.New("the shared store cannot keep the secrets' key: set [secrets] key_file on every member")
	}
	ctx, cancel := context.WithTimeout(context.Background(), postgresOpenTimeout)
	defer cancel()
	key, err := secrets.SharedKey(ctx, kv, log)
	if err != nil {
		return fmt.Errorf("the secrets' key kept in PostgreSQL: %w", err)
	}
	bc.SecretKey = key
	return nil
}

// clusterKeyError explains a member's key that does not open the secrets
// the cluster shares: every member must use one key.
func clusterKeyError(err error, cfg *fileConfig) error {
	if !errors.Is(err, secrets.ErrWrongKey) {
		return err
	}
	var mine string
	switch {
	case strings.TrimSpace(os.Getenv(secrets.EnvKey)) != "":
		mine = "the key in " + secrets.EnvKey
	case cfg.Secrets.KeyFile != "":
		mine = "the key in [secrets] key_file " + cfg.Secrets.KeyFile
	default:
		mine = "the key kept in PostgreSQL (no [secrets] key_file)"
	}
	return fmt.Errorf("the cluster's secrets in PostgreSQL were sealed with another key than this member's, %s: "+
		"give every member the same [secrets] key_file (or %s), or set it on no member so that all use the key kept in PostgreSQL (%w)",
		mine, secrets.EnvKey, err)
}

// clusterOptions builds the member's cluster options from the flags: etcd
// membership with --etcd, a static member list with --peers.
func clusterOptions(o *options) (tdcluster.Options, error) {
	host, portText, err := net.SplitHostPort(o.clusterAddr)
	if err != nil {
		return tdcluster.Options{}, fmt.Errorf("--cluster-addr: %w", err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return tdcluster.Options{}, fmt.Errorf("--cluster-addr: bad port %q", portText)
	}
	co := tdcluster.Options{Name: o.clusterName, Host: host, Port: port}
	switch {
	case o.etcd != "" && o.peers != "":
		return co, errors.New("give --etcd or --peers, not both")
	case o.etcd != "":
		p, err := etcd.NewWithConfig("/tooldispatch", clientv3.Config{Endpoints: splitList(o.etcd), DialTimeout: 5 * time.Second})
		if err != nil {
			return co, fmt.Errorf("--etcd: %w", err)
		}
		co.Provider = p
	case o.peers != "":
		if o.automanagePort <= 0 {
			return co, errors.New("--peers needs --automanage-port, this member's entry in the list")
		}
		co.Provider = automanaged.NewWithConfig(membershipTTL, o.automanagePort, splitList(o.peers)...)
	default:
		return co, errors.New("--cluster needs a membership: --peers (static list) or --etcd")
	}
	return co, nil
}

// clusterConfig is the [cluster] section: owner routing of a member
// (serve --cluster; ignored otherwise).
type clusterConfig struct {
	// ServiceURL is the address (scheme://host[:port][/prefix]) the other
	// members name to clients as this member's: the Tooldispatch-Owner
	// header and redirects point there. --service-url wins. Default
	// http://HOST:PORT of the listener (--addr), its host replaced by the
	// --cluster-addr host when it listens on all interfaces.
	ServiceURL string `toml:"service_url"`
	// Redirect answers a session request that another member owns with
	// 307 Temporary Redirect to the owner, without running it, instead of
	// forwarding it over the cluster (--redirect turns it on too).
	Redirect bool `toml:"redirect"`
}

// validate names the first bad key.
func (c clusterConfig) validate() error {
	if c.ServiceURL != "" {
		if err := checkServiceURL(c.ServiceURL); err != nil {
			return fmt.Errorf("cluster.service_url: %w", err)
		}
	}
	return nil
}

// checkServiceURL accepts an http or https URL without query or fragment.
func checkServiceURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("%q is not an http or https address (scheme://host[:port][/prefix])", s)
	}
	return nil
}

// routing is a member's owner routing as the flags and [cluster] decide.
type routing struct {
	redirect   bool
	serviceURL string
}

// routingSettings decides the owner routing of a member listening on
// listen: a flag wins over the file's key.
func routingSettings(o *options, cfg *fileConfig, listen net.Addr) (routing, error) {
	r := routing{redirect: o.redirect || cfg.Cluster.Redirect, serviceURL: cmp.Or(o.serviceURL, cfg.Cluster.ServiceURL)}
	if o.serviceURL != "" {
		if err := checkServiceURL(o.serviceURL); err != nil {
			return r, fmt.Errorf("--service-url: %w", err)
		}
	}
	if r.serviceURL == "" && listen != nil {
		host, port, err := net.SplitHostPort(listen.String())
		if err != nil {
			return r, err
		}
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			if h, _, err := net.SplitHostPort(o.clusterAddr); err == nil && h != "" {
				host = h
			}
		}
		r.serviceURL = "http://" + net.JoinHostPort(host, port)
	}
	return r, nil
}

// memberPlacement is a cluster member as the service's Placement.
type memberPlacement struct{ m *tdcluster.Member }

func (p memberPlacement) Owner(ctx context.Context, session string) (string, bool) {
	o := p.m.Owner(ctx, session)
	return o.URL, o.Self
}

func (p memberPlacement) Forwarded() uint64 { return p.m.Forwarded() }
