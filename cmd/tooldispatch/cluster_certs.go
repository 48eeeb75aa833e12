package main

import (
	"bytes"
	"cmp"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
)

// Certificates made by "tooldispatch cluster certs".
const (
	// caValidity is how long the cluster's CA is valid.
	caValidity = 10 * 365 * 24 * time.Hour
	// memberValidity is how long a member's or a service's certificate
	// is valid.
	memberValidity = 2 * 365 * 24 * time.Hour
	// certBackdate covers clocks that lag the machine that made them.
	certBackdate = time.Hour
)

const clusterUsage = `Usage: tooldispatch cluster certs --dir DIR --host HOST[,HOST…] [--service] NAME

Makes the certificates of the members' mutual TLS ([cluster] ca_file, cert_file,
key_file; docs/CLUSTER.md): the cluster's CA in DIR/ca.pem and DIR/ca-key.pem
(made once, kept afterwards), and member NAME's certificate DIR/NAME.pem and key
DIR/NAME-key.pem, signed by that CA and naming each HOST (the --cluster-addr
host others dial, and the host of its --automanage-port).

With --service, makes instead the certificate of a service port (serve --addr;
[service] cert_file, key_file; docs/CONFIG.md): DIR/NAME-service.pem and
DIR/NAME-service-key.pem, for server authentication only, naming each HOST
clients reach the service at, signed by the services' own CA, DIR/service-ca.pem
and DIR/service-ca-key.pem (made once), never by the cluster's: a service's key
does not make a member. Clients trust DIR/service-ca.pem (curl --cacert, the
browser's or the system's trust store).

Keys are written with mode 0600. DIR is marked as tooldispatch's own
(DIR/.tooldispatch-own): no tool of a workspace that holds it reads, lists or
changes anything in it. A CA key mints certificates (a member's, or one clients
of the service trust): keep it off the members and out of every workspace (move
it away and give --ca-key PATH for the next certificate).

Flags:
`

// certKind is what "cluster certs" makes: a member's certificate, or a
// service port's.
type certKind struct {
	caCert, caKey string // the CA's files in DIR
	caName        string // the CA's common name
	suffix        string // of NAME in the certificate's files
	usages        []x509.ExtKeyUsage
	mints         string // what the CA key's holder can do
}

var (
	memberCerts = certKind{caCert: "ca.pem", caKey: "ca-key.pem", caName: "tooldispatch cluster CA",
		usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		mints:  "can mint a member certificate and join the cluster. Members need only ca.pem and their own certificate and key"}
	serviceCerts = certKind{caCert: "service-ca.pem", caKey: "service-ca-key.pem", caName: "tooldispatch service CA", suffix: "-service",
		usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		mints: "can mint a certificate that the service's clients trust, and pose as the service to them. " +
			"The service needs only its own certificate and key, its clients only service-ca.pem"}
)

// cmdCluster implements "tooldispatch cluster certs".
func (e *env) cmdCluster(args []string) error {
	if len(args) == 0 || args[0] != "certs" {
		if wantsHelp(args) {
			fmt.Fprint(e.stdout, clusterUsage)
			return nil
		}
		fmt.Fprint(e.stderr, clusterUsage)
		return &exitError{code: exitUsage}
	}
	fs := flag.NewFlagSet("cluster certs", flag.ContinueOnError)
	var out bytes.Buffer
	fs.SetOutput(&out)
	dir := fs.String("dir", "", "the `DIR` holding the CA and the certificates")
	hosts := fs.String("host", "", "comma-separated `HOSTS` (names or IP addresses) the member, or with --service the service, is reached at")
	caKeyFlag := fs.String("ca-key", "", "the CA's key `FILE` (default DIR/ca-key.pem, with --service DIR/service-ca-key.pem)")
	forService := fs.Bool("service", false, "make a service port's certificate (server authentication only, signed by DIR/service-ca.pem), not a member's")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), clusterUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			_, _ = e.stdout.Write(out.Bytes())
			return nil
		}
		_, _ = e.stderr.Write(out.Bytes())
		return &exitError{code: exitUsage}
	}
	if fs.NArg() != 1 || *dir == "" || *hosts == "" {
		return failf(exitUsage, "cluster certs: give --dir, --host and one NAME")
	}
	name := fs.Arg(0)
	if name == "ca" || name == "service-ca" || filepath.Base(name) != name || name == "." || name == ".." {
		return failf(exitUsage, "cluster certs: bad name %q", name)
	}
	kind := memberCerts
	if *forService {
		kind = serviceCerts
	}
	keyPath := cmp.Or(*caKeyFlag, filepath.Join(*dir, kind.caKey))
	certFile, keyFile, err := issueCerts(*dir, name, splitList(*hosts), keyPath, kind)
	if err != nil {
		return failf(exitFailure, "cluster certs: %v", err)
	}
	if abs, err := filepath.Abs(keyPath); err == nil && filepath.Dir(abs) == mustAbs(*dir) {
		fmt.Fprintf(e.stderr, "warning: %s is a CA key: whoever reads it %s. "+
			"Keep the CA key off the machines that serve and out of every workspace, e.g.\n"+
			"  mv %s ~/tooldispatch-%s\n"+
			"and give --ca-key ~/tooldispatch-%s when you make the next certificate.\n", keyPath, kind.mints, keyPath, kind.caKey, kind.caKey)
	}
	if *forService {
		fmt.Fprintf(e.stdout, "cert_file = %q\nkey_file = %q\n", certFile, keyFile)
		return nil
	}
	fmt.Fprintf(e.stdout, "ca_file = %q\ncert_file = %q\nkey_file = %q\n", filepath.Join(*dir, kind.caCert), certFile, keyFile)
	return nil
}

// issueCerts makes DIR (marked as tooldispatch's own), the CA of kind
// unless it is there, and NAME's certificate and key; it returns their
// files.
func issueCerts(dir, name string, hosts []string, caKeyPath string, kind certKind) (certFile, keyFile string, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	if err := markOwn(dir); err != nil {
		return "", "", err
	}
	ca, caKey, err := loadOrMakeCA(filepath.Join(dir, kind.caCert), caKeyPath, kind.caName)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, name+kind.suffix+".pem"), filepath.Join(dir, name+kind.suffix+"-key.pem")
	if err := makeLeafCert(certFile, keyFile, name, hosts, kind.usages, ca, caKey); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// ownMarkerText is what DIR/.tooldispatch-own says to a person.
const ownMarkerText = "This directory holds tooldispatch's certificates and keys, a cluster's or a service's (tooldispatch cluster certs).\n" +
	"No tool of a workspace that holds it reads, lists or changes anything in it.\n"

// markOwn writes DIR's marker (builtin.OwnMarker), unless it is there.
func markOwn(dir string) error {
	f, err := os.OpenFile(filepath.Join(dir, builtin.OwnMarker), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := f.WriteString(ownMarkerText); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func mustAbs(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// loadOrMakeCA reads the CA's certificate at certPath and its key at
// keyPath, or makes them.
func loadOrMakeCA(certPath, keyPath, commonName string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	if certPEM, err := os.ReadFile(certPath); err == nil {
		keyPEM, err := os.ReadFile(keyPath)
		if err != nil {
			return nil, nil, fmt.Errorf("the CA's key: %w", err)
		}
		cb, _ := pem.Decode(certPEM)
		kb, _ := pem.Decode(keyPEM)
		if cb == nil || kb == nil {
			return nil, nil, fmt.Errorf("%s or %s is not PEM", certPath, keyPath)
		}
		ca, err := x509.ParseCertificate(cb.Bytes)
		if err != nil {
			return nil, nil, err
		}
		key, err := x509.ParseECPrivateKey(kb.Bytes)
		if err != nil {
			return nil, nil, fmt.Errorf("the CA's key: %w", err)
		}
		return ca, key, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-certBackdate),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	ca, _ := x509.ParseCertificate(der)
	if err := writePEM(keyPath, "EC PRIVATE KEY", mustMarshalEC(key), 0o600); err != nil {
		return nil, nil, err
	}
	if err := writePEM(certPath, "CERTIFICATE", der, 0o644); err != nil {
		return nil, nil, err
	}
	return ca, key, nil
}

// makeLeafCert writes a certificate (certFile) and its key (keyFile, mode
// 0600) for the usages given, naming hosts, signed by the CA.
func makeLeafCert(certFile, keyFile, name string, hosts []string, usages []x509.ExtKeyUsage, ca *x509.Certificate, caKey *ecdsa.PrivateKey) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    now.Add(-certBackdate),
		NotAfter:     now.Add(memberValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usages,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	if err := writePEM(keyFile, "EC PRIVATE KEY", mustMarshalEC(key), 0o600); err != nil {
		return err
	}
	return writePEM(certFile, "CERTIFICATE", der, 0o644)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return n
}

func mustMarshalEC(k *ecdsa.PrivateKey) []byte {
	b, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		panic(err) // a P-256 key always marshals
	}
	return b
}

// writePEM writes one PEM block to a new file (an existing one is an
// error: certificates are not replaced behind the operator's back).
func writePEM(path, kind string, der []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if err := pem.Encode(f, &pem.Block{Type: kind, Bytes: der}); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
