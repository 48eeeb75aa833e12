package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// serviceCA is a CA a test made, and the certificates it issued.
type serviceCA struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	pool   *x509.CertPool
	serial int64
}

func newServiceCA(t *testing.T) *serviceCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test service CA"},
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
	return &serviceCA{cert: cert, key: key, pool: pool, serial: 100}
}

// issue makes a server certificate for 127.0.0.1 and returns its PEM, its
// key's PEM and its serial number.
func (ca *serviceCA) issue(t *testing.T) (certPEM, keyPEM []byte, serial int64) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial), Subject: pkix.Name{CommonName: "test service"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), ca.serial
}

// client is an HTTPS client that trusts the CA alone.
func (ca *serviceCA) client() *http.Client {
	return &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool}, ForceAttemptHTTP2: true},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// putFile replaces path with content, written beside it and renamed over
// it, as an operator or a renewal job does.
func putFile(t *testing.T, path string, content []byte, mode os.FileMode) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, content, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// tlsServe starts serve with a [service] section naming a certificate
// and key of ca's, and a token; it returns the server, the token and the
// two files.
func tlsServe(t *testing.T, ca *serviceCA, args ...string) (s *server, token, certFile, keyFile string) {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "service.pem"), filepath.Join(dir, "service-key.pem")
	certPEM, keyPEM, _ := ca.issue(t)
	putFile(t, certFile, certPEM, 0o644)
	putFile(t, keyFile, keyPEM, 0o600)
	token = "tls-test-token-" + randomText("t")
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	config := writeConfig(t, fmt.Sprintf("[service]\ncert_file = %q\nkey_file = %q\n", certFile, keyFile))
	s = startServe(t, append([]string{"--config", config, "--token-file", tokenFile, "--log-level", "info"}, args...)...)
	return s, token, certFile, keyFile
}

// sseEvents reads an event stream's events (name and data) into a channel.
func sseEvents(t *testing.T, resp *http.Response) <-chan [2]string {
	t.Helper()
	out := make(chan [2]string, 64)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		name := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				out <- [2]string{name, strings.TrimPrefix(line, "data: ")}
			case line == "":
				name = ""
			}
		}
	}()
	return out
}

// TestServeOverTLS: with [service] cert_file and key_file, serve serves
// HTTPS (TLS 1.2 or later, HTTP/2) on its port, and says so: an event
// stream, a turn that waits for a confirmation, the confirmation with the
// args_hash the stream showed, and the turn's result all go over it; the
// page's login cookie is Secure (and HttpOnly, SameSite=Strict); a plain
// HTTP request to the port is answered 400 and nothing is served; a TLS
// 1.1 client is refused in the handshake; no plaintext warning is logged;
// a command refused the data folder is told the https address.
func TestServeOverTLS(t *testing.T) {
	ca := newServiceCA(t)
	ws, data := exampleWorkspace(t), t.TempDir()
	s, token, _, _ := tlsServe(t, ca, "--workspace", ws, "--data", data, "--approve", "ask", "--confirm-timeout", "1m")
	if !strings.HasPrefix(s.base, "https://127.0.0.1:") {
		t.Fatalf("serve says it serves on %q, want https://", s.base)
	}
	if strings.Contains(s.startup, "plain HTTP") {
		t.Errorf("serve over TLS warned of plain HTTP:\n%s", s.startup)
	}
	hc := ca.client()
	authed := func(method, path, body string) *http.Request {
		req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		return req
	}

	req := authed("GET", "/v1/sessions/tls-s/events", "")
	req.Header.Set("Accept", "text/event-stream")
	stream, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	if stream.StatusCode != http.StatusOK || stream.TLS == nil || stream.TLS.Version < tls.VersionTLS12 || stream.Proto != "HTTP/2.0" {
		t.Fatalf("the event stream: %d %s %+v", stream.StatusCode, stream.Proto, stream.TLS)
	}
	events := sseEvents(t, stream)

	type reply struct {
		code int
		body string
		err  error
	}
	done := make(chan reply, 1)
	go func() {
		resp, err := hc.Do(authed("POST", "/v1/sessions/tls-s/turns",
			envelope(`"provider":"claude-code","auto_load_schemas":true`, editCall("w1", "over-tls.txt", "approved over TLS\n"))))
		if err != nil {
			done <- reply{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		done <- reply{resp.StatusCode, string(b), err}
	}()
	var hash string
	for hash == "" {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("the event stream ended before the confirmation")
			}
			if ev[0] == "tool_confirm" {
				var c struct {
					CallID   string `json:"call_id"`
					ArgsHash string `json:"args_hash"`
				}
				if err := json.Unmarshal([]byte(ev[1]), &c); err != nil || c.CallID != "w1" {
					t.Fatalf("tool_confirm %s: %v", ev[1], err)
				}
				hash = c.ArgsHash
			}
		case r := <-done:
			t.Fatalf("the turn ended before its confirmation: %+v", r)
		case <-time.After(time.Minute):
			t.Fatal("no tool_confirm on the event stream within a minute")
		}
	}
	resp, err := hc.Do(authed("POST", "/v1/sessions/tls-s/confirm/w1", `{"approve":true,"args_hash":"`+hash+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("confirm over TLS: %d", resp.StatusCode)
	}
	select {
	case r := <-done:
		if r.err != nil || r.code != http.StatusOK || !strings.Contains(r.body, `"status":"ok"`) {
			t.Fatalf("the turn: %d %v %s", r.code, r.err, r.body)
		}
	case <-time.After(time.Minute):
		t.Fatal("the turn did not end within a minute of its confirmation")
	}
	if b, err := os.ReadFile(filepath.Join(ws, "over-tls.txt")); err != nil || string(b) != "approved over TLS\n" {
		t.Errorf("over-tls.txt = %q, %v", b, err)
	}
	for result := false; !result; {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("the event stream ended before the call's tool_result")
			}
			result = ev[0] == "tool_result" && strings.Contains(ev[1], `"call_id":"w1"`)
		case <-time.After(time.Minute):
			t.Fatal("no tool_result of w1 on the event stream within a minute")
		}
	}

	t.Run("login cookie", func(t *testing.T) {
		req, err := http.NewRequest("POST", s.base+"/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", s.base)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		cookies := resp.Cookies()
		if resp.StatusCode != http.StatusSeeOther || len(cookies) != 1 || !cookies[0].Secure || !cookies[0].HttpOnly ||
			cookies[0].SameSite != http.SameSiteStrictMode || cookies[0].Path != "/" || cookies[0].MaxAge <= 0 {
			t.Errorf("login over TLS: %d Set-Cookie %q, want one Secure, HttpOnly, SameSite=Strict cookie", resp.StatusCode, resp.Header.Values("Set-Cookie"))
		}
	})

	t.Run("plain HTTP to the TLS port", func(t *testing.T) {
		plain := "http://" + strings.TrimPrefix(s.base, "https://")
		req, err := http.NewRequest("GET", plain+"/v1/sessions", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "HTTPS server") || strings.Contains(string(b), "tls-s") {
			t.Errorf("plain HTTP to the TLS port: %d %q, want 400 and no session", resp.StatusCode, b)
		}
	})

	t.Run("the store's holder names the https address", func(t *testing.T) {
		e, _, stderr := testEnv(strings.NewReader(""))
		if code := e.main([]string{"session", "--workspace", ws, "--data", data, "--session", "tls-s"}); code != exitFailure {
			t.Fatalf("session on serve's data: exit %d: %s", code, stderr.String())
		}
		if msg := stderr.String(); !strings.Contains(msg, "GET "+s.base+"/v1/sessions/tls-s") {
			t.Errorf("the message does not name %s:\n%s", s.base, msg)
		}
	})

	t.Run("TLS 1.1 client", func(t *testing.T) {
		c, err := tls.Dial("tcp", strings.TrimPrefix(s.base, "https://"),
			&tls.Config{RootCAs: ca.pool, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11})
		if err == nil {
			c.Close()
			t.Fatal("a TLS 1.1 client was served")
		}
		if !strings.Contains(err.Error(), "protocol version") {
			t.Errorf("a TLS 1.1 client: %v, want a protocol version alert", err)
		}
	})
}

// TestServeReadsTheCertificateAgain: serve over TLS reads its certificate
// and key again when they change: after the files are replaced, a new
// connection gets the new certificate without a restart; a replacement
// that cannot be used (a key that does not match, a key file with a
// second name) keeps the certificate in use, and the log says why.
func TestServeReadsTheCertificateAgain(t *testing.T) {
	ca := newServiceCA(t)
	s, _, certFile, keyFile := tlsServe(t, ca, "--workspace", t.TempDir(), "--data", t.TempDir())
	addr := strings.TrimPrefix(s.base, "https://")
	served := func() int64 {
		t.Helper()
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.pool})
		if err != nil {
			t.Fatalf("a new connection: %v", err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	first := served()

	certPEM, keyPEM, second := ca.issue(t)
	putFile(t, certFile, certPEM, 0o644)
	putFile(t, keyFile, keyPEM, 0o600)
	if got := served(); got != second {
		t.Fatalf("after the files were replaced a new connection got certificate %d, want the new one %d (the first was %d)", got, second, first)
	}

	otherCert, otherKey, _ := ca.issue(t)
	putFile(t, certFile, otherCert, 0o644)
	if got := served(); got != second {
		t.Errorf("a certificate beside another key: a new connection got %d, want the one in use %d", got, second)
	}
	putFile(t, keyFile, otherKey, 0o600)
	if err := os.Link(keyFile, filepath.Join(t.TempDir(), "key-elsewhere.pem")); err != nil {
		t.Fatal(err)
	}
	if got := served(); got != second {
		t.Errorf("a key file with a second name: a new connection got %d, want the one in use %d", got, second)
	}
	for _, want := range []string{"private key does not match public key", "has 2 links", "read again"} {
		s.waitLogged(t, want)
	}
}

// TestServeWarnsOfPlaintext: serve on an address that is not loopback
// without TLS warns at start that the token and the page's cookie cross
// the network in clear, and how to serve TLS or use a proxy; with TLS it
// does not.
func TestServeWarnsOfPlaintext(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("plaintext-test-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "--addr", "0.0.0.0:0", "--token-file", tokenFile, "--workspace", t.TempDir(), "--data", t.TempDir())
	for _, want := range []string{"0.0.0.0:0", "plain HTTP", "token", "cookie", "in clear", "[service] cert_file and key_file", "TLS proxy"} {
		if !strings.Contains(s.startup, want) {
			t.Errorf("serve on 0.0.0.0 without TLS: its start lacks %q:\n%s", want, s.startup)
		}
	}
	if !strings.HasPrefix(s.base, "http://") {
		t.Errorf("serve says it serves on %q", s.base)
	}

	ca := newServiceCA(t)
	tlsServer, _, _, _ := tlsServe(t, ca, "--addr", "0.0.0.0:0", "--workspace", t.TempDir(), "--data", t.TempDir())
	if strings.Contains(tlsServer.startup, "plain HTTP") || !strings.HasPrefix(tlsServer.base, "https://") {
		t.Errorf("serve on 0.0.0.0 over TLS (%s):\n%s\nwant no plaintext warning", tlsServer.base, tlsServer.startup)
	}
}

// TestServiceKeyOutOfReach: the [service] certificate and key, even inside
// the workspace, are tooldispatch's own: no tool reads or replaces them
// (a replaced pair would be served to the next connection).
func TestServiceKeyOutOfReach(t *testing.T) {
	ws := exampleWorkspace(t)
	ca := newServiceCA(t)
	certPEM, keyPEM, _ := ca.issue(t)
	if err := os.Mkdir(filepath.Join(ws, "tls"), 0o700); err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(ws, "tls", "service.pem"), filepath.Join(ws, "tls", "service-key.pem")
	putFile(t, certFile, certPEM, 0o644)
	putFile(t, keyFile, keyPEM, 0o600)
	config := writeConfig(t, fmt.Sprintf("[service]\ncert_file = %q\nkey_file = %q\n", certFile, keyFile))
	res := runTurn(t, toolCallsTurn(t,
		[3]any{"r1", "read_files", map[string]any{"paths": []string{"tls/service-key.pem"}}},
		[3]any{"e1", "edit_file", map[string]any{"path": "tls/service-key.pem", "content": "pwned"}},
		[3]any{"e2", "edit_file", map[string]any{"path": "tls/service.pem", "content": "pwned"}},
	), "--workspace", ws, "--data", t.TempDir(), "--config", config, "--approve", "all")
	for _, id := range []string{"r1", "e1", "e2"} {
		wantRefused(t, res, id, keyPEM)
	}
	if b, _ := os.ReadFile(keyFile); string(b) != string(keyPEM) {
		t.Fatal("the service's key changed")
	}
	if b, _ := os.ReadFile(certFile); string(b) != string(certPEM) {
		t.Fatal("the service's certificate changed")
	}
}

// TestServiceTLSKeysGoTogether: [service] cert_file without key_file, or
// the other way round, is refused when the file is read, naming both; a
// pair whose key does not match stops serve (exit 2) before it listens,
// naming why.
func TestServiceTLSKeysGoTogether(t *testing.T) {
	for _, body := range []string{"[service]\ncert_file = \"c.pem\"\n", "[service]\nkey_file = \"k.pem\"\n"} {
		_, err := loadConfig(writeConfig(t, body), t.TempDir(), zerolog.Nop())
		if err == nil || !strings.Contains(err.Error(), "service.cert_file and service.key_file go together") {
			t.Errorf("%q: %v, want a refusal naming both keys", body, err)
		}
	}
	ca := newServiceCA(t)
	dir := t.TempDir()
	certPEM, _, _ := ca.issue(t)
	_, otherKey, _ := ca.issue(t)
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	putFile(t, certFile, certPEM, 0o644)
	putFile(t, keyFile, otherKey, 0o600)
	config := writeConfig(t, fmt.Sprintf("[service]\ncert_file = %q\nkey_file = %q\n", certFile, keyFile))
	var out, errb strings.Builder
	e := &env{stdout: &out, stderr: &errb, getwd: os.Getwd}
	code := e.main([]string{"serve", "--addr", "127.0.0.1:0", "--config", config, "--workspace", t.TempDir(), "--data", t.TempDir()})
	if code != exitUsage || !strings.Contains(errb.String(), "[service] cert_file, key_file") || !strings.Contains(errb.String(), "private key does not match public key") ||
		strings.Contains(errb.String(), "serving on") {
		t.Errorf("serve with a key that does not match: exit %d\n%s\nwant 2 naming the keys and why, before serving", code, errb.String())
	}
}
