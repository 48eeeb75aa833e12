package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// ErrNoClusterCA: the CA file holds no certificate.
var ErrNoClusterCA = errors.New("cluster: the CA file holds no PEM certificate")

// TLS is a member's mutual TLS: every connection between members (the
// remote transport, gossip included, and the static membership checks)
// presents this member's certificate and accepts only a peer whose
// certificate the cluster's CA signed. A connection without one is refused
// in the handshake, before any message is read.
type TLS struct {
	// Server is the listeners' side: it requires and verifies a client
	// certificate signed by the cluster's CA.
	Server *tls.Config
	// Client is the dialling side: it presents the member's certificate
	// and trusts only the cluster's CA for the peer's (whose certificate
	// must name the host dialled).
	Client *tls.Config
}

// LoadTLS reads the cluster's CA certificate and this member's
// certificate and key (PEM files).
func LoadTLS(caFile, certFile, keyFile string) (*TLS, error) {
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("cluster: reading the CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%w: %s", ErrNoClusterCA, caFile)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("cluster: the member's certificate and key: %w", err)
	}
	return &TLS{
		Server: &tls.Config{
			MinVersion:   tls.VersionTLS13,
			Certificates: []tls.Certificate{cert},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    pool,
		},
		Client: &tls.Config{
			MinVersion:   tls.VersionTLS13,
			Certificates: []tls.Certificate{cert},
			RootCAs:      pool,
		},
	}, nil
}
