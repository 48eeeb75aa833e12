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

	"github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd"
	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"

	tdcluster "github.com/tooldispatch/tooldispatch/actors/cluster"
	"github.com/tooldispatch/tooldispatch/belt"
	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/postgres"
	"github.com/tooldispatch/tooldispatch/service"
	"github.com/tooldispatch/tooldispatch/toolkit/secrets"
)

const (
	// etcdDialTimeout bounds connecting to etcd.
	etcdDialTimeout = 5 * time.Second
	// etcdBaseKey is the prefix of the members' keys in etcd.
	etcdBaseKey = "/tooldispatch"
	// postgresOpenTimeout bounds connecting to the shared store at start.
	postgresOpenTimeout = 30 * time.Second
)

// errNoPostgres: a member was given no URL of the shared store.
var errNoPostgres = errors.New("--cluster needs the URL of the shared PostgreSQL store: --postgres-file FILE or $TOOLDISPATCH_PG_URL (or --postgres URL, which every local user sees in the process list); the members share their sessions there")

// postgresURL is the shared store's URL: --postgres (or --postgres-file),
// else $TOOLDISPATCH_PG_URL.
func postgresURL(o *options) (string, error) {
	if url := cmp.Or(o.postgres, os.Getenv("TOOLDISPATCH_PG_URL")); url != "" {
		return url, nil
	}
	return "", errNoPostgres
}

// clusterStore opens the shared PostgreSQL store and keeps the member's own
// Badger (local) for the 30-minute cache.
func clusterStore(o *options, local cachestore.Store, log zerolog.Logger) (cachestore.Store, error) {
	url, err := postgresURL(o)
	if err != nil {
		return nil, err
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
func clusterOptions(o *options, cfg *fileConfig, log zerolog.Logger) (tdcluster.Options, error) {
	host, portText, err := net.SplitHostPort(o.clusterAddr)
	if err != nil {
		return tdcluster.Options{}, fmt.Errorf("--cluster-addr: %w", err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return tdcluster.Options{}, fmt.Errorf("--cluster-addr: bad port %q", portText)
	}
	co := tdcluster.Options{Name: o.clusterName, Host: host, Port: port, Logger: log.With().Str("component", "cluster").Logger()}
	if o.etcd != "" && o.peers != "" {
		return co, errors.New("give --etcd or --peers, not both")
	}
	if o.peers != "" && o.automanagePort <= 0 {
		return co, errors.New("--peers needs --automanage-port, this member's entry in the list")
	}
	if co.TLS, err = clusterTLS(o, cfg); err != nil {
		return co, err
	}
	switch {
	case o.etcd != "":
		ec := clientv3.Config{Endpoints: splitList(o.etcd), DialTimeout: etcdDialTimeout}
		if co.TLS != nil && hasHTTPS(ec.Endpoints) {
			// An etcd that checks client certificates against the
			// cluster's CA takes registrations from members only.
			ec.TLS = co.TLS.Client.Clone()
		}
		if err := checkEtcd(ec); err != nil {
			return co, err
		}
		p, err := etcd.NewWithConfig(etcdBaseKey, ec)
		if err != nil {
			return co, fmt.Errorf("--etcd: %w", err)
		}
		co.Provider = p
	case o.peers != "":
		p, err := tdcluster.NewStatic(tdcluster.StaticOptions{Listen: net.JoinHostPort(host, strconv.Itoa(o.automanagePort)),
			Peers: splitList(o.peers), TLS: co.TLS, Logger: log.With().Str("component", "membership").Logger()})
		if err != nil {
			return co, fmt.Errorf("--automanage-port: %w", err)
		}
		co.Provider = p
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
	// http://HOST:PORT of the listener (--addr; https:// with [service]
	// cert_file), its host replaced by the --cluster-addr host when it
	// listens on all interfaces.
	ServiceURL string `toml:"service_url"`
	// Redirect answers a session request that another member owns with
	// 307 Temporary Redirect to the owner, without running it, instead of
	// forwarding it over the cluster (--redirect turns it on too).
	Redirect bool `toml:"redirect"`
	// CAFile, CertFile and KeyFile are the members' mutual TLS (PEM): the
	// cluster's CA certificate, and this member's certificate (signed by
	// that CA, naming the --cluster-addr host) and its key. Every
	// connection between members, and every static membership check,
	// presents the certificate and accepts only a peer the CA signed. A
	// member whose --cluster-addr is not loopback, or that has a --token,
	// refuses to start without them.
	CAFile   string `toml:"ca_file"`
	CertFile string `toml:"cert_file"`
	KeyFile  string `toml:"key_file"`
}

// validate names the first bad key.
func (c clusterConfig) validate() error {
	if c.ServiceURL != "" {
		if err := checkServiceURL(c.ServiceURL); err != nil {
			return fmt.Errorf("cluster.service_url: %w", err)
		}
	}
	set := 0
	for _, f := range []string{c.CAFile, c.CertFile, c.KeyFile} {
		if f != "" {
			set++
		}
	}
	if set != 0 && set != 3 {
		return errors.New("cluster.ca_file, cluster.cert_file and cluster.key_file go together: give all three or none")
	}
	return nil
}

// tlsFiles reports whether the members' mutual TLS is configured.
func (c clusterConfig) tlsFiles() bool { return c.CAFile != "" }

// errClusterTLSRequired: a member that must authenticate its peers has no
// certificates.
var errClusterTLSRequired = errors.New("the cluster port needs mutual TLS")

// clusterTLS loads the members' mutual TLS, or refuses a member that needs
// it and has none: one whose --cluster-addr is not loopback (anyone who
// can reach the port could send its grains orders: approve a call, answer
// a question, run a turn) or that has a --token (the cluster port must not
// be a way around it). Nil without [cluster] ca_file on a loopback member
// without a token.
func clusterTLS(o *options, cfg *fileConfig) (*tdcluster.TLS, error) {
	if cfg.Cluster.tlsFiles() {
		t, err := tdcluster.LoadTLS(cfg.Cluster.CAFile, cfg.Cluster.CertFile, cfg.Cluster.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("[cluster] ca_file, cert_file, key_file: %w", err)
		}
		return t, nil
	}
	host, _, _ := net.SplitHostPort(o.clusterAddr)
	switch {
	case !service.IsLoopbackHost(host):
		return nil, fmt.Errorf("%w: --cluster-addr %s is not loopback; set [cluster] ca_file, cert_file and key_file "+
			"(see docs/CLUSTER.md: tooldispatch cluster certs makes them)", errClusterTLSRequired, o.clusterAddr)
	case o.token != "":
		return nil, fmt.Errorf("%w: the service has a --token, and the cluster port must not be a way around it; "+
			"set [cluster] ca_file, cert_file and key_file (see docs/CLUSTER.md: tooldispatch cluster certs makes them)", errClusterTLSRequired)
	}
	return nil, nil
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
		scheme := "http://"
		if cfg.Service.tlsFiles() {
			scheme = "https://"
		}
		r.serviceURL = scheme + net.JoinHostPort(host, port)
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

// Successor names the member that will own session once this one has
// left (service.Successor).
func (p memberPlacement) Successor(ctx context.Context, session string) string {
	return p.m.Successor(ctx, session).URL
}

// hasHTTPS reports whether any etcd endpoint is an https URL.
func hasHTTPS(endpoints []string) bool {
	for _, e := range endpoints {
		if strings.HasPrefix(e, "https://") {
			return true
		}
	}
	return false
}
