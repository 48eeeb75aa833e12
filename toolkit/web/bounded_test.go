package web

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Bounds of TestFetchPageWorkEndsWithTheCall.
const (
	// hostilePageBytes is the size of the hostile page.
	hostilePageBytes = 4 << 20
	// workWindow is how long the test waits for the page's work to end
	// after the call returned.
	workWindow = 5 * time.Second
	// cpuAfterReturn is the most CPU the process may spend in that window.
	cpuAfterReturn = time.Second
)

// processCPU is the CPU time (user and system) the process has used.
func processCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// hostilePages are pages shaped to make text extraction slow: one
// paragraph without a sentence end, deep nesting, and a flood of short
// lines.
var hostilePages = map[string]func(n int) string{
	"one paragraph": func(n int) string {
		return "<html><body><p>" + strings.Repeat("abcdefghi ", n/10) + "</p></body></html>"
	},
	"deep nesting": func(n int) string {
		unit := strings.Repeat("<div>", 400) + "a, b, c." + strings.Repeat("</div>", 400)
		return "<html><body>" + strings.Repeat(unit, n/len(unit)) + "</body></html>"
	},
	"short lines": func(n int) string {
		return "<html><body><pre>" + strings.Repeat("x\n", n/2) + "</pre></body></html>"
	},
}

// TestFetchPageWorkEndsWithTheCall: a hostile multi-MiB page on loopback;
// the call ends (its context is cancelled) once the server has sent the
// whole page, while the page is being processed. After the call returned,
// the page's work must stop: the process spends at most cpuAfterReturn of
// CPU in the workWindow after it, and the shared execution is over by
// then.
func TestFetchPageWorkEndsWithTheCall(t *testing.T) {
	for name, shape := range hostilePages {
		t.Run(name, func(t *testing.T) {
			page := shape(hostilePageBytes)
			sent := make(chan struct{})
			s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				fmt.Fprint(w, page)
				w.(http.Flusher).Flush()
				close(sent)
			}))
			defer s.Close()
			deps := testDeps(newFakeClock())
			deps.Cache = nil
			w, err := New(deps)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()

			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				<-sent
				cancel()
			}()
			_, err = callCtx(ctx, t, w, FetchPageName, "s1", obj{"url": s.URL + "/"})
			cancel()
			before := processCPU(t)
			idle := make(chan struct{})
			go func() {
				w.wg.Wait()
				close(idle)
			}()
			timer := time.NewTimer(workWindow)
			defer timer.Stop()
			ended := true
			select {
			case <-idle:
			case <-timer.C:
				ended = false
			}
			used := processCPU(t) - before
			t.Logf("call: %v; CPU after it returned: %s", err, used)
			if used > cpuAfterReturn {
				t.Errorf("the process used %.1f CPU-seconds after the call returned (at most %s allowed)", used.Seconds(), cpuAfterReturn)
			}
			if !ended {
				t.Errorf("the page's work still ran %s after the call returned", workWindow)
			}
		})
	}
}

// BenchmarkHostilePage measures the CPU time of extracting and splitting a
// hostile page, by shape and size: linear in the size (before the work was
// bounded, one paragraph of 5 MiB took 167 CPU-seconds, 2 MiB 29).
func BenchmarkHostilePage(b *testing.B) {
	base, _ := url.Parse("http://x.example/")
	for _, name := range []string{"one paragraph", "deep nesting", "short lines"} {
		for _, size := range []int{1 << 20, 4 << 20} {
			body := []byte(hostilePages[name](size))
			b.Run(fmt.Sprintf("%s/%dMiB", strings.ReplaceAll(name, " ", "_"), size>>20), func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				var ru0, ru1 syscall.Rusage
				_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
				for b.Loop() {
					ex, err := extract(b.Context(), body, "text/html", base, nil, false)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := splitPassages(b.Context(), ex.Text, ex.Headings); err != nil {
						b.Fatal(err)
					}
				}
				_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
				cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
				b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
			})
		}
	}
}

// TestCloseEndsPageWork: closing the web tools (a service shutting down)
// while a hostile page is being processed ends that work at once: Close
// returns within workWindow, and the caller gets its answer.
func TestCloseEndsPageWork(t *testing.T) {
	page := hostilePages["one paragraph"](hostilePageBytes)
	sent := make(chan struct{})
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, page)
		w.(http.Flusher).Flush()
		close(sent)
	}))
	defer s.Close()
	deps := testDeps(newFakeClock())
	deps.Cache = nil
	w, err := New(deps)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 1)
	go func() {
		_, err := callCtx(context.Background(), t, w, FetchPageName, "s1", obj{"url": s.URL + "/"})
		errs <- err
	}()
	<-sent
	closed := make(chan struct{})
	before := processCPU(t)
	go func() {
		w.Close()
		close(closed)
	}()
	timer := time.NewTimer(workWindow)
	defer timer.Stop()
	select {
	case <-closed:
	case <-timer.C:
		t.Fatalf("Close still waited for the page's work %s later (%.1f CPU-seconds spent)", workWindow, (processCPU(t) - before).Seconds())
	}
	if used := processCPU(t) - before; used > cpuAfterReturn {
		t.Errorf("closing used %.1f CPU-seconds", used.Seconds())
	}
	if err := <-errs; err == nil {
		t.Log("the page was processed before Close")
	}
}
