package service

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// testCA is a certificate authority a test made.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

// newTestCA makes a CA valid for a day.
func newTestCA(t testing.TB) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tooldispatch test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// testPair is a server certificate and its key, PEM.
type testPair struct {
	certPEM, keyPEM []byte
	serial          *big.Int
	spki            string // base64 of the SHA-256 of its public key
}

var testSerial struct {
	sync.Mutex
	n int64
}

// issue makes a server certificate for 127.0.0.1 and localhost, valid
// from notBefore for a day.
func (ca *testCA) issue(t testing.TB, notBefore time.Time) testPair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	testSerial.Lock()
	testSerial.n++
	serial := big.NewInt(1000 + testSerial.n)
	testSerial.Unlock()
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "tooldispatch test service"},
		NotBefore: notBefore, NotAfter: notBefore.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	spki, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(spki)
	return testPair{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		serial:  serial, spki: base64.StdEncoding.EncodeToString(sum[:]),
	}
}

// replaceFile puts content at path the way an operator replaces a
// certificate: written beside it, then renamed over it.
func replaceFile(t *testing.T, path string, content []byte, mode os.FileMode) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, content, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tmp, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// write puts the pair at certFile and keyFile (key 0600).
func (p testPair) write(t *testing.T, certFile, keyFile string) {
	t.Helper()
	replaceFile(t, certFile, p.certPEM, 0o644)
	replaceFile(t, keyFile, p.keyPEM, 0o600)
}

// lockedBuffer is a log's buffer written by the server's goroutines and
// read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// handshakes serves TLS handshakes with cfg on a loopback port until the
// test ends, and returns a dial that reports the serial number of the
// certificate a new connection was given.
func handshakes(t *testing.T, cfg *tls.Config, ca *testCA) func() *big.Int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = tls.Server(c, cfg).Handshake()
			c.Close()
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return func() *big.Int {
		t.Helper()
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.pool})
		if err != nil {
			t.Fatalf("a new connection: %v", err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber
	}
}

// TestCertFilesReadAgain: the certificate and key are read again by the
// next handshake after they change: a new connection gets the new
// certificate, without a restart. A new pair that cannot be used — both
// files emptied, a key that does not match the certificate, a file that is
// missing or not PEM, a key file with a second name — leaves the
// certificate in use as it is,
// and is logged once, naming why; a usable pair afterwards is taken.
func TestCertFilesReadAgain(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "service.pem"), filepath.Join(dir, "service-key.pem")
	first := ca.issue(t, time.Now().Add(-time.Hour))
	first.write(t, certFile, keyFile)
	var logs lockedBuffer
	cf, err := LoadCertFiles(certFile, keyFile, zerolog.New(&logs))
	if err != nil {
		t.Fatal(err)
	}
	served := handshakes(t, cf.TLSConfig(), ca)
	if got := served(); got.Cmp(first.serial) != 0 {
		t.Fatalf("the first connection got certificate %v, want %v", got, first.serial)
	}

	second := ca.issue(t, time.Now().Add(-time.Hour))
	second.write(t, certFile, keyFile)
	if got := served(); got.Cmp(second.serial) != 0 {
		t.Fatalf("after the files were replaced a new connection got certificate %v, want the new one %v", got, second.serial)
	}
	if !strings.Contains(logs.String(), "read again") {
		t.Errorf("the reload is not logged:\n%s", logs.String())
	}

	other := ca.issue(t, time.Now().Add(-time.Hour))
	cases := []struct {
		name   string
		set    func(t *testing.T)
		reason string
	}{
		{"both files emptied", func(t *testing.T) {
			replaceFile(t, certFile, nil, 0o644)
			replaceFile(t, keyFile, nil, 0o600)
		}, "failed to find any PEM data in certificate input"},
		{"a certificate beside another key", func(t *testing.T) {
			replaceFile(t, certFile, other.certPEM, 0o644)
			replaceFile(t, keyFile, second.keyPEM, 0o600)
		}, "private key does not match public key"},
		{"a missing key file", func(t *testing.T) {
			if err := os.Remove(keyFile); err != nil {
				t.Fatal(err)
			}
		}, "no such file or directory"},
		{"a key file that is not PEM", func(t *testing.T) {
			replaceFile(t, keyFile, []byte("not a key\n"), 0o600)
		}, "failed to find any PEM data in key input"},
		{"a key file with a second name", func(t *testing.T) {
			replaceFile(t, keyFile, other.keyPEM, 0o600)
			if err := os.Link(keyFile, filepath.Join(t.TempDir(), "copy-key.pem")); err != nil {
				t.Fatal(err)
			}
		}, "has 2 links"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := strings.Count(logs.String(), c.reason)
			c.set(t)
			for range 3 {
				if got := served(); got.Cmp(second.serial) != 0 {
					t.Fatalf("a new connection got certificate %v, want the one in use %v", got, second.serial)
				}
			}
			if n := strings.Count(logs.String(), c.reason) - before; n != 1 {
				t.Errorf("%q logged %d times over 3 connections, want once:\n%s", c.reason, n, logs.String())
			}
		})
	}

	third := ca.issue(t, time.Now().Add(-time.Hour))
	third.write(t, certFile, keyFile)
	if got := served(); got.Cmp(third.serial) != 0 {
		t.Fatalf("after a usable pair came back a new connection got %v, want %v", got, third.serial)
	}
	if got := cf.Certificate().Leaf.SerialNumber; got.Cmp(third.serial) != 0 {
		t.Errorf("Certificate() = %v, want %v", got, third.serial)
	}
}

// TestCertFilesRefusedAtStart: a pair that cannot be used is refused at
// start, naming why; a key file others may read is served and warned of.
func TestCertFilesRefusedAtStart(t *testing.T) {
	ca := newTestCA(t)
	pair, other := ca.issue(t, time.Now().Add(-time.Hour)), ca.issue(t, time.Now().Add(-time.Hour))
	cases := []struct {
		name   string
		set    func(t *testing.T, certFile, keyFile string)
		reason string
		is     error
	}{
		{"another key", func(t *testing.T, certFile, keyFile string) {
			replaceFile(t, certFile, pair.certPEM, 0o644)
			replaceFile(t, keyFile, other.keyPEM, 0o600)
		}, "private key does not match public key", nil},
		{"no certificate file", func(t *testing.T, _, keyFile string) {
			replaceFile(t, keyFile, pair.keyPEM, 0o600)
		}, "reading the TLS certificate", os.ErrNotExist},
		{"a key in the certificate file", func(t *testing.T, certFile, keyFile string) {
			replaceFile(t, certFile, pair.keyPEM, 0o644)
			replaceFile(t, keyFile, pair.keyPEM, 0o600)
		}, "failed to find certificate PEM data", nil},
		{"a key file with a second name", func(t *testing.T, certFile, keyFile string) {
			pair.write(t, certFile, keyFile)
			if err := os.Link(keyFile, filepath.Join(filepath.Dir(keyFile), "elsewhere.pem")); err != nil {
				t.Fatal(err)
			}
		}, "has 2 links", ErrKeyFileLinks},
		{"a directory for a key", func(t *testing.T, certFile, keyFile string) {
			replaceFile(t, certFile, pair.certPEM, 0o644)
			if err := os.Mkdir(keyFile, 0o700); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
			c.set(t, certFile, keyFile)
			_, err := LoadCertFiles(certFile, keyFile, zerolog.Nop())
			if err == nil || !strings.Contains(err.Error(), c.reason) || (c.is != nil && !errors.Is(err, c.is)) {
				t.Errorf("LoadCertFiles = %v, want an error naming %q", err, c.reason)
			}
		})
	}

	t.Run("a key readable by others", func(t *testing.T) {
		dir := t.TempDir()
		certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
		replaceFile(t, certFile, pair.certPEM, 0o644)
		replaceFile(t, keyFile, pair.keyPEM, 0o644)
		var logs lockedBuffer
		if _, err := LoadCertFiles(certFile, keyFile, zerolog.New(&logs)); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(logs.String(), "readable by others") || !strings.Contains(logs.String(), "-rw-r--r--") {
			t.Errorf("a key file of mode 0644 is not warned of:\n%s", logs.String())
		}
	})

	t.Run("an expired certificate", func(t *testing.T) {
		dir := t.TempDir()
		certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
		ca.issue(t, time.Now().Add(-48*time.Hour)).write(t, certFile, keyFile)
		var logs lockedBuffer
		if _, err := LoadCertFiles(certFile, keyFile, zerolog.New(&logs)); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(logs.String(), "has expired") {
			t.Errorf("an expired certificate is not warned of:\n%s", logs.String())
		}
	})
}

// TestTLSPortVersions: the service port speaks TLS 1.2 and 1.3 and
// refuses TLS 1.0 and 1.1 in the handshake.
func TestTLSPortVersions(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	ca.issue(t, time.Now().Add(-time.Hour)).write(t, certFile, keyFile)
	cf, err := LoadCertFiles(certFile, keyFile, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = tls.Server(c, cf.TLSConfig()).Handshake()
			c.Close()
		}
	})
	defer func() {
		ln.Close()
		wg.Wait()
	}()
	for _, v := range []struct {
		name    string
		version uint16
		ok      bool
	}{
		{"TLS 1.0", tls.VersionTLS10, false},
		{"TLS 1.1", tls.VersionTLS11, false},
		{"TLS 1.2", tls.VersionTLS12, true},
		{"TLS 1.3", tls.VersionTLS13, true},
	} {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.pool, MinVersion: v.version, MaxVersion: v.version})
		if err == nil {
			c.Close()
		}
		if (err == nil) != v.ok {
			t.Errorf("a %s client: %v, want ok=%v", v.name, err, v.ok)
		}
		if !v.ok && err != nil && !strings.Contains(err.Error(), "protocol version") {
			t.Errorf("a %s client was refused with %v, want a protocol version alert", v.name, err)
		}
	}
}

// TestPlaintextRisk: a listener that is not loopback is warned of, naming
// what crosses the network and what to do.
func TestPlaintextRisk(t *testing.T) {
	for _, c := range []struct {
		addr string
		warn bool
	}{
		{"127.0.0.1:8723", false},
		{"[::1]:8723", false},
		{"localhost:8723", false},
		{"0.0.0.0:8723", true},
		{":8723", true},
		{"[::]:8723", true},
		{"192.168.1.10:8723", true},
		{"example.com:8723", true},
	} {
		msg := PlaintextRisk(c.addr)
		if (msg != "") != c.warn {
			t.Errorf("PlaintextRisk(%q) = %q, want a warning: %v", c.addr, msg, c.warn)
			continue
		}
		if c.warn {
			for _, want := range []string{c.addr, "token", "cookie", "in clear", "[service] cert_file and key_file", "TLS proxy"} {
				if !strings.Contains(msg, want) {
					t.Errorf("PlaintextRisk(%q) = %q, lacks %q", c.addr, msg, want)
				}
			}
		}
	}
}

// BenchmarkCertFilesCheck is what reading the files again adds to a
// handshake (unchanged files), beside a whole TLS 1.3 handshake on
// loopback with the same configuration.
func BenchmarkCertFilesCheck(b *testing.B) {
	ca := newTestCA(b)
	dir := b.TempDir()
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	p := ca.issue(b, time.Now().Add(-time.Hour))
	if err := os.WriteFile(certFile, p.certPEM, 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(keyFile, p.keyPEM, 0o600); err != nil {
		b.Fatal(err)
	}
	cf, err := LoadCertFiles(certFile, keyFile, zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("check", func(b *testing.B) {
		for b.Loop() {
			if _, err := cf.getCertificate(nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/check")
	})
	b.Run("handshake", func(b *testing.B) {
		cfg := cf.TLSConfig()
		for b.Loop() {
			cc, sc := net.Pipe()
			done := make(chan error, 1)
			go func() { done <- tls.Server(sc, cfg).Handshake() }()
			err := tls.Client(cc, &tls.Config{RootCAs: ca.pool, ServerName: "localhost"}).Handshake()
			if serr := <-done; err != nil || serr != nil {
				b.Fatal(err, serr)
			}
			cc.Close()
			sc.Close()
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/handshake")
	})
}
