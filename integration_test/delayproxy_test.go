package integration

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// delayProxy is a TCP proxy on loopback that holds every chunk it passes
// for a fixed one-way delay in each direction, keeping the order (a
// stand-in for tc netem delay, which this kernel lacks), and counts the
// chunks clients send: with a request-response protocol such as
// PostgreSQL's, each is a round trip.
type delayProxy struct {
	addr  string
	sends atomic.Int64 // chunks from clients to the target
}

type chunk struct {
	due  time.Time
	data []byte
}

// startDelayProxy proxies to target with oneWay delay each way until the
// test ends.
func startDelayProxy(t *testing.T, target string, oneWay time.Duration) *delayProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &delayProxy{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); pump(s, c, oneWay, &p.sends) }()
			go func() { defer wg.Done(); pump(c, s, oneWay, nil) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return p
}

// pump copies src to dst, each chunk delayed by d from when it was read.
func pump(dst, src net.Conn, d time.Duration, count *atomic.Int64) {
	q := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range q {
			if wait := time.Until(c.due); wait > 0 {
				time.Sleep(wait)
			}
			if _, err := dst.Write(c.data); err != nil {
				for range q {
				}
				return
			}
		}
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if count != nil {
				count.Add(1)
			}
			q <- chunk{due: time.Now().Add(d), data: append([]byte(nil), buf[:n]...)}
		}
		if err != nil {
			if err != io.EOF {
				dst.Close()
			}
			break
		}
	}
	close(q)
	<-done
}
