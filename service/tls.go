package service

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// The service port's TLS. The serve command wraps its listener in
// tls.NewListener(ln, certs.TLSConfig()); a program of its own may do the
// same, or terminate TLS in front of the service.
const (
	// MinTLSVersion is the oldest TLS the service port speaks: a TLS 1.0
	// or 1.1 client is refused in the handshake.
	MinTLSVersion = tls.VersionTLS12
	// maxCertFileBytes bounds what is read of a certificate or key file.
	maxCertFileBytes = 1 << 20
)

// ErrKeyFileLinks: the service's key file has another name (a hard link),
// which may lie where tools or commands can read it.
var ErrKeyFileLinks = errors.New("service: the TLS key file has more than one link")

// CertFiles is the service port's certificate and key, read from their PEM
// files at start and read again by every TLS handshake: the first new
// connection after either file changed gets the new pair, without a
// restart. A new pair that cannot be used (a file unreadable or not PEM, a
// key that does not match the certificate, a key file with more than one
// link) leaves the pair in use as it is, and is logged once, naming why; a
// key file that others may read is served and warned of. Safe for
// concurrent use.
type CertFiles struct {
	// immutable after LoadCertFiles
	certFile, keyFile string
	log               zerolog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate // guarded by mu: the pair in use
	current pairFiles        // guarded by mu: what the pair in use was read from
	refused *pairFiles       // guarded by mu: the last pair refused, logged once
}

// pairFiles is what was read of the two files, or why they could not be.
type pairFiles struct {
	cert, key []byte
	keyMode   fs.FileMode // the key file's permissions
	readErr   error
}

func (p pairFiles) same(o pairFiles) bool {
	return errorText(p.readErr) == errorText(o.readErr) && bytes.Equal(p.cert, o.cert) && bytes.Equal(p.key, o.key)
}

func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// LoadCertFiles reads the certificate (PEM, the server's certificate
// first, then any intermediates) and the key (PEM) the service port
// presents. It fails when they cannot be used; a key file readable by
// others is logged as a warning.
func LoadCertFiles(certFile, keyFile string, log zerolog.Logger) (*CertFiles, error) {
	c := &CertFiles{certFile: certFile, keyFile: keyFile, log: log.With().Str("component", "tls").Logger()}
	files := c.read()
	if files.readErr != nil {
		return nil, files.readErr
	}
	cert, err := c.pair(files)
	if err != nil {
		return nil, err
	}
	c.cert, c.current = cert, files
	return c, nil
}

// TLSConfig is the service port's TLS: version 1.2 or later, the pair in
// use presented (read again when the files change), HTTP/2 or HTTP/1.1.
func (c *CertFiles) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     MinTLSVersion,
		GetCertificate: c.getCertificate,
		NextProtos:     []string{"h2", "http/1.1"},
	}
}

// Certificate returns the pair in use.
func (c *CertFiles) Certificate() *tls.Certificate {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cert
}

// getCertificate is the handshake's certificate: the files are read again,
// and a changed pair replaces the one in use when it can be used.
func (c *CertFiles) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	files := c.read()
	c.mu.Lock()
	defer c.mu.Unlock()
	if files.same(c.current) || (c.refused != nil && files.same(*c.refused)) {
		return c.cert, nil
	}
	cert, err := (*tls.Certificate)(nil), files.readErr
	if err == nil {
		cert, err = c.pair(files)
	}
	if err != nil {
		c.refused = &files
		c.log.Warn().Str("cert_file", c.certFile).Str("key_file", c.keyFile).Str("reason", err.Error()).
			Msg("the TLS certificate or key changed and cannot be used: the service goes on presenting the certificate it had")
		return c.cert, nil
	}
	c.cert, c.current, c.refused = cert, files, nil
	c.log.Info().Str("cert_file", c.certFile).Str("subject", cert.Leaf.Subject.String()).
		Time("not_after", cert.Leaf.NotAfter).Msg("the TLS certificate and key were read again: new connections get them")
	return c.cert, nil
}

// read reads both files.
func (c *CertFiles) read() pairFiles {
	cert, _, err := readPEMFile(c.certFile, false)
	if err != nil {
		return pairFiles{readErr: err}
	}
	key, mode, err := readPEMFile(c.keyFile, true)
	if err != nil {
		return pairFiles{readErr: err}
	}
	return pairFiles{cert: cert, key: key, keyMode: mode}
}

// pair makes the key pair of what was read and says what is wrong with it.
func (c *CertFiles) pair(files pairFiles) (*tls.Certificate, error) {
	cert, err := tls.X509KeyPair(files.cert, files.key)
	if err != nil {
		return nil, fmt.Errorf("service: TLS certificate %s and key %s: %w", c.certFile, c.keyFile, err)
	}
	if cert.Leaf == nil {
		return nil, fmt.Errorf("service: TLS certificate %s holds no certificate", c.certFile)
	}
	now := time.Now()
	switch {
	case now.After(cert.Leaf.NotAfter):
		c.log.Warn().Str("cert_file", c.certFile).Time("not_after", cert.Leaf.NotAfter).
			Msg("the TLS certificate has expired: clients that check it refuse the service")
	case now.Before(cert.Leaf.NotBefore):
		c.log.Warn().Str("cert_file", c.certFile).Time("not_before", cert.Leaf.NotBefore).
			Msg("the TLS certificate is not valid yet: clients that check it refuse the service")
	}
	if files.keyMode&0o077 != 0 {
		c.log.Warn().Str("key_file", c.keyFile).Str("mode", files.keyMode.String()).
			Msg("the TLS key file is readable by others, who can then pose as this service: chmod 600 it")
	}
	return &cert, nil
}

// readPEMFile reads a certificate or key file, at most maxCertFileBytes of
// it, and its permissions. A key file with more than one name is refused:
// its other name may lie where tools or commands can read it.
func readPEMFile(path string, key bool) ([]byte, fs.FileMode, error) {
	what := "certificate"
	if key {
		what = "key"
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("service: reading the TLS %s: %w", what, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("service: reading the TLS %s: %w", what, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("service: the TLS %s %s is not a regular file", what, path)
	}
	if n := linkCount(fi); key && n > 1 {
		return nil, 0, fmt.Errorf("%w: key file %s has %d links: another name of it may lie where tools or commands can read it; "+
			"find it (find / -xdev -samefile %s) and remove it", ErrKeyFileLinks, path, n, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxCertFileBytes+1))
	if err != nil {
		return nil, 0, fmt.Errorf("service: reading the TLS %s %s: %w", what, path, err)
	}
	if len(b) > maxCertFileBytes {
		return nil, 0, fmt.Errorf("service: the TLS %s %s is larger than %d bytes", what, path, maxCertFileBytes)
	}
	return b, fi.Mode().Perm(), nil
}

// linkCount is how many names the file has.
func linkCount(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

// PlaintextRisk says what serving addr (host:port) without TLS exposes:
// empty for a loopback address; otherwise the warning to log at start.
func PlaintextRisk(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || isLoopbackHost(host) {
		return ""
	}
	if host == "" {
		host = "every interface"
	}
	return strings.Join([]string{
		"the service listens on " + addr + " (" + host + ", not loopback) over plain HTTP:",
		"the bearer token of every request and the operator page's login cookie cross the network in clear,",
		"for anyone on the path to read and replay;",
		"set [service] cert_file and key_file to serve HTTPS (tooldispatch cluster certs --service makes them),",
		"or listen on loopback behind a TLS proxy",
	}, " ")
}
