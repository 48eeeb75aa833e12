package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A network lab for partition tests: each cluster member runs in a network
// namespace of its own, linked by a veth pair to a bridge in a hub
// namespace, on the link-local range labSubnet.0/24 (private to the lab's
// namespaces: the host's own namespace gets no interface, address or
// route). PostgreSQL and etcd stay on the host's loopback; the test process
// reaches them from the hub through forwarders it listens with inside the
// hub (labHub), and reaches the members' HTTP APIs by dialling from inside
// the hub. A partition is the member's link set down in the hub.
const (
	labSubnet = "169.254.77"
	labHub    = labSubnet + ".254" // the hub's bridge address
	labPrefix = "tdlab"            // namespace names: tdlab-PID-ID-ROLE
	// Ports inside a member's namespace: each member has its own stack, so
	// they are fixed.
	labHTTPPort    = 8080
	labClusterPort = 7000
	labManagePort  = 6000
	// labToken is the members' API token: they listen on non-loopback
	// addresses.
	labToken = "netns-lab-token"
)

// netnsLab is a set of network namespaces made for one test and removed
// when it ends (t.Cleanup, also when it fails).
type netnsLab struct {
	t       *testing.T
	hub     string   // the hub namespace
	members []string // the members' namespaces
	mu      sync.Mutex
	closers []func()
}

// requireNetns skips the test unless it runs as root where network
// namespaces can be made.
func requireNetns(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network-namespace partitions need root (ip netns add); CI runs the tests as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("ip not installed: .ci/run installs the iproute2 package")
	}
	probe := fmt.Sprintf("%s-%d-probe", labPrefix, os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", probe).CombinedOutput(); err != nil {
		t.Skipf("ip netns is not available here: %v: %s", err, strings.TrimSpace(string(out)))
	}
	_ = exec.Command("ip", "netns", "del", probe).Run()
}

// newNetnsLab makes a hub and n member namespaces. Member i has address
// labSubnet.(i+1) on its eth0; its link in the hub is vmI.
func newNetnsLab(t *testing.T, n int) *netnsLab {
	t.Helper()
	requireNetns(t)
	sweepNetns()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	name := fmt.Sprintf("%s-%d-%s", labPrefix, os.Getpid(), hex.EncodeToString(b))
	lab := &netnsLab{t: t, hub: name + "-hub"}
	// Registered first, so it runs last: after the members and forwarders,
	// whose own clean-ups let go of the namespaces.
	t.Cleanup(lab.teardown)
	lab.ip("netns", "add", lab.hub)
	lab.ip("-n", lab.hub, "link", "set", "lo", "up")
	lab.ip("-n", lab.hub, "link", "add", "br0", "type", "bridge")
	lab.ip("-n", lab.hub, "addr", "add", labHub+"/24", "dev", "br0")
	lab.ip("-n", lab.hub, "link", "set", "br0", "up")
	for i := 0; i < n; i++ {
		ns := fmt.Sprintf("%s-m%d", name, i)
		lab.ip("netns", "add", ns)
		lab.members = append(lab.members, ns)
		lab.ip("-n", ns, "link", "set", "lo", "up")
		lab.ip("-n", lab.hub, "link", "add", lab.link(i), "type", "veth", "peer", "name", "eth0", "netns", ns)
		lab.ip("-n", lab.hub, "link", "set", lab.link(i), "master", "br0")
		lab.ip("-n", lab.hub, "link", "set", lab.link(i), "up")
		lab.ip("-n", ns, "addr", "add", lab.addr(i)+"/24", "dev", "eth0")
		lab.ip("-n", ns, "link", "set", "eth0", "up")
	}
	return lab
}

// sweepNetns removes the lab namespaces of test processes that are gone
// (a test run that was killed before its clean-up).
func sweepNetns() {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		parts := strings.Split(name, "-")
		if len(parts) < 3 || parts[0] != labPrefix {
			continue
		}
		pid, err := strconv.Atoi(parts[1])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); errors.Is(err, os.ErrNotExist) {
			_ = exec.Command("ip", "netns", "del", name).Run()
		}
	}
}

func (l *netnsLab) link(i int) string { return fmt.Sprintf("vm%d", i) }
func (l *netnsLab) addr(i int) string { return fmt.Sprintf("%s.%d", labSubnet, i+1) }

// ip runs ip(8) and fails the test when it fails.
func (l *netnsLab) ip(args ...string) {
	l.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		l.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// cut drops member i's link (a partition: nothing reaches it, it reaches
// nothing); heal brings it back.
func (l *netnsLab) cut(i int)  { l.ip("-n", l.hub, "link", "set", l.link(i), "down") }
func (l *netnsLab) heal(i int) { l.ip("-n", l.hub, "link", "set", l.link(i), "up") }

func (l *netnsLab) teardown() {
	l.mu.Lock()
	closers := l.closers
	l.closers = nil
	l.mu.Unlock()
	for i := len(closers) - 1; i >= 0; i-- {
		closers[i]()
	}
	for _, ns := range append(l.members, l.hub) {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			l.t.Errorf("removing namespace %s: %v: %s", ns, err, out)
		}
	}
}

// onClose runs f at tear-down, before the namespaces go.
func (l *netnsLab) onClose(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closers = append(l.closers, f)
}

// inNetns runs f on an OS thread that has entered namespace ns: sockets f
// opens belong to ns. The thread goes back to the process's namespace
// after f, or, if it cannot, ends with its goroutine.
func inNetns(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- err
			return
		}
		defer own.Close()
		target, err := os.Open("/run/netns/" + ns)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("entering %s: %w", ns, err)
			return
		}
		ferr := f()
		if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("leaving %s: %w", ns, err) // the thread stays locked and ends
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// client is an HTTP client whose connections start in the hub: it reaches
// the members' APIs.
func (l *netnsLab) client() *http.Client {
	var d net.Dialer
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := inNetns(l.hub, func() (err error) {
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}}
	l.onClose(tr.CloseIdleConnections)
	return &http.Client{Transport: bearer{tr}}
}

// bearer sends labToken with every request.
type bearer struct{ next http.RoundTripper }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+labToken)
	return b.next.RoundTrip(r)
}

// forward listens in the hub on labHub:port and forwards each connection
// to target on the host's loopback, each chunk held for delay first (0:
// none; an in-process stand-in for netem delay, which this kernel lacks).
func (l *netnsLab) forward(port int, target string, delay time.Duration) string {
	l.t.Helper()
	var ln net.Listener
	addr := net.JoinHostPort(labHub, strconv.Itoa(port))
	if err := inNetns(l.hub, func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		l.t.Fatalf("listening in the hub: %v", err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	track := func(c net.Conn, on bool) bool {
		mu.Lock()
		defer mu.Unlock()
		if on && conns == nil {
			return false
		}
		if on {
			conns[c] = true
		} else {
			delete(conns, c)
		}
		return true
	}
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if delay > 0 {
					time.Sleep(delay)
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		// One direction ended: end both.
		_ = dst.Close()
		_ = src.Close()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			if !track(in, true) || !track(out, true) {
				in.Close()
				out.Close()
				return
			}
			wg.Add(2)
			go func() { pipe(out, in); track(in, false) }()
			go func() { pipe(in, out); track(out, false) }()
		}
	}()
	l.onClose(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		conns = nil
		mu.Unlock()
		wg.Wait()
	})
	return addr
}

// labCluster is n members, each in its own namespace of lab, over one
// PostgreSQL (and etcd with etcd membership) on the host.
type labCluster struct {
	lab    *netnsLab
	ms     []*member
	exited []chan struct{} // closed when member i's process ended
	c      *http.Client
	pgURL  string   // the store, as the test process reaches it
	hist   *history // every turn posted through turn
}

// startLabCluster starts n members inside lab's namespaces (ip netns exec)
// with membership "static" or "etcd", the store's and etcd's links
// delayed by delay each way, and waits until each serves a turn.
func startLabCluster(t *testing.T, lab *netnsLab, ws, membership string, delay time.Duration) *labCluster {
	t.Helper()
	pgURL := pgServer(t)
	pgHost, err := hostOf(pgURL)
	if err != nil {
		t.Fatal(err)
	}
	hostURL := pgURL
	pgURL = strings.Replace(pgURL, pgHost, lab.forward(5432, pgHost, delay), 1)
	var membershipArgs []string
	if membership == "etcd" {
		etcdURL := etcdServer(t)
		etcdHost, err := hostOf(etcdURL)
		if err != nil {
			t.Fatal(err)
		}
		membershipArgs = []string{"--etcd", "http://" + lab.forward(2379, etcdHost, delay)}
	}
	n := len(lab.members)
	var peers []string
	for i := 0; i < n; i++ {
		peers = append(peers, fmt.Sprintf("%s:%d", lab.addr(i), labManagePort))
	}
	lc := &labCluster{lab: lab, c: lab.client(), pgURL: hostURL}
	// Each member's certificate names its lab address: the members dial
	// each other there, over mutual TLS.
	certs := filepath.Join(t.TempDir(), "certs")
	for i := 0; i < n; i++ {
		if out, err := exec.Command(binary, "cluster", "certs", "--dir", certs, "--host", lab.addr(i), fmt.Sprintf("m%d", i)).CombinedOutput(); err != nil {
			t.Fatalf("cluster certs: %v\n%s", err, out)
		}
	}
	logs := newMemberLogs(t)
	lc.hist = newHistory(t, logs)
	for i := 0; i < n; i++ {
		m := &member{http: fmt.Sprintf("http://%s:%d", lab.addr(i), labHTTPPort), name: fmt.Sprintf("m%d", i), logs: logs, certs: certs}
		args := []string{"netns", "exec", lab.members[i], binary, "serve", "--approve", "all", "--shell", "--workspace", ws, "--data", t.TempDir(),
			"--addr", fmt.Sprintf("%s:%d", lab.addr(i), labHTTPPort), "--cluster", "lab", "--config", memberConfig(t, "", certs, i),
			"--cluster-addr", fmt.Sprintf("%s:%d", lab.addr(i), labClusterPort), "--postgres", pgURL, "--log-level", memberLogLevel(), "--token", labToken}
		if membershipArgs == nil {
			args = append(args, "--peers", strings.Join(peers, ","), "--automanage-port", fmt.Sprint(labManagePort))
		} else {
			args = append(args, membershipArgs...)
		}
		// ip netns exec execs the command: the process is the member.
		m.cmd = exec.Command("ip", args...)
		logs.attach(t, m)
		if err := m.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() {
			_ = m.cmd.Wait()
			close(exited)
		}()
		lc.ms = append(lc.ms, m)
		lc.exited = append(lc.exited, exited)
	}
	t.Cleanup(func() {
		for i, m := range lc.ms {
			_ = m.cmd.Process.Signal(syscall.SIGCONT)
			_ = m.cmd.Process.Kill()
			<-lc.exited[i]
		}
	})
	deadline := time.Now().Add(90 * time.Second)
	for i, m := range lc.ms {
		for {
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := lc.turn(cctx, i, fmt.Sprintf("warm-%d", i), "", commandCall("w", "true"))
			cancel()
			if err == nil {
				break
			}
			select {
			case <-lc.exited[i]:
				t.Fatalf("member %d exited: %v\n%s", i, m.cmd.ProcessState, m.log)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("member %d never served a turn: %v\n%s", i, err, m.log)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return lc
}

// hostOf is the host:port of a URL.
func hostOf(u string) (string, error) {
	_, rest, ok := strings.Cut(u, "://")
	if !ok {
		return "", fmt.Errorf("no scheme in %q", u)
	}
	if at := strings.LastIndex(strings.SplitN(rest, "/", 2)[0], "@"); at >= 0 {
		rest = rest[at+1:]
	}
	host, _, _ := strings.Cut(rest, "/")
	host, _, _ = strings.Cut(host, "?")
	return host, nil
}

// turn posts a turn to member i (postTurn through the hub) and records it.
func (lc *labCluster) turn(ctx context.Context, i int, session, turnID string, calls ...map[string]any) (*turnReply, error) {
	return lc.hist.post(ctx, lc.c, lc.ms[i].http, session, turnID, calls...)
}

// index is the member whose cluster address is addr.
func (lc *labCluster) index(t *testing.T, addr string) int {
	t.Helper()
	for i := range lc.ms {
		if addr == fmt.Sprintf("%s:%d", lc.lab.addr(i), labClusterPort) {
			return i
		}
	}
	t.Fatalf("member %q is none of the lab's", addr)
	return -1
}
