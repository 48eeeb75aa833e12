package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/integration_test/otlptest"
)

// calcCall is a calculate call with id id.
func calcCall(id string) string {
	return `{"id":"` + id + `","type":"function","function":{"name":"calculate","arguments":"{\"expression\":\"6*7\"}"}}`
}

const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
	callerTP    = "00-" + callerTrace + "-" + callerSpan + "-01"
)

func startReceiver(t *testing.T) *otlptest.Receiver {
	t.Helper()
	r := otlptest.Start()
	t.Cleanup(r.Close)
	return r
}

// TestRunTracesToOTLP: [telemetry] traces, endpoint and service_name send
// the spans of run's turns to the endpoint, under the envelope's
// traceparent, named by the service name; everything is sent before run
// exits.
func TestRunTracesToOTLP(t *testing.T) {
	rcv := startReceiver(t)
	cfg := writeConfig(t, fmt.Sprintf("[telemetry]\ntraces = true\nendpoint = %q\nservice_name = \"td-run\"\n", rcv.URL()))
	out := runTurns(t, envelope(`"provider":"claude-code","auto_load_schemas":true,"traceparent":"`+callerTP+`"`, calcCall("c1")),
		"--workspace", t.TempDir(), "--data", t.TempDir(), "--config", cfg)
	if got := strings.Join(out.statuses(), " "); got != "c1:calculate:ok" {
		t.Fatalf("results: %s", got)
	}
	spans := otlptest.Trace(rcv.Spans(), callerTrace)
	t.Logf("run's turn:\n%s", otlptest.Tree(spans, "service.name", "gen_ai.tool.call.id", "tooldispatch.status"))
	d := otlptest.Named(spans, "tooldispatch.dispatch")
	if len(d) != 1 || d[0].ParentID != callerSpan {
		t.Fatalf("no dispatch span under the envelope's traceparent: %+v", spans)
	}
	for _, name := range []string{"tooldispatch.turn", "tooldispatch.preflight", "tooldispatch.execute", "execute_tool calculate", "tooldispatch.commit"} {
		s := otlptest.Named(spans, name)
		if len(s) != 1 {
			t.Errorf("%d spans %q, want 1", len(s), name)
			continue
		}
		if s[0].Resource["service.name"] != "td-run" {
			t.Errorf("%s: service.name %q", name, s[0].Resource["service.name"])
		}
	}
}

// TestRunTelemetrySampleRatio: sample_ratio = 0 keeps no trace started
// here, and still follows a caller that sampled its trace.
func TestRunTelemetrySampleRatio(t *testing.T) {
	rcv := startReceiver(t)
	cfg := writeConfig(t, fmt.Sprintf("[telemetry]\ntraces = true\nendpoint = %q\nsample_ratio = 0.0\n", rcv.URL()))
	runTurns(t, envelope(`"provider":"claude-code","auto_load_schemas":true`, calcCall("c1"))+"\n"+
		envelope(`"provider":"claude-code","auto_load_schemas":true,"traceparent":"`+callerTP+`"`, calcCall("c2")),
		"--workspace", t.TempDir(), "--data", t.TempDir(), "--config", cfg)
	spans := rcv.Spans()
	if n := len(otlptest.Named(spans, "tooldispatch.turn")); n != 1 || len(otlptest.Trace(spans, callerTrace)) != len(spans) {
		t.Errorf("%d turns traced, want only the caller's sampled one:\n%s", n, otlptest.Tree(spans))
	}
}

// TestTelemetryEnvironment: the standard OTEL_* variables win over the
// file: OTEL_EXPORTER_OTLP_ENDPOINT over endpoint, OTEL_SERVICE_NAME over
// service_name, OTEL_TRACES_EXPORTER=none over traces = true, and
// OTEL_TRACES_EXPORTER=otlp turns tracing on without a file.
func TestTelemetryEnvironment(t *testing.T) {
	input := envelope(`"provider":"claude-code","auto_load_schemas":true`, calcCall("c1"))
	run := func(t *testing.T, cfg string) {
		runTurns(t, input, "--workspace", t.TempDir(), "--data", t.TempDir(), "--config", writeConfig(t, cfg))
	}
	t.Run("endpoint and service name", func(t *testing.T) {
		rcv := startReceiver(t)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL())
		t.Setenv("OTEL_SERVICE_NAME", "from-env")
		run(t, "[telemetry]\ntraces = true\nendpoint = \"http://127.0.0.1:9\"\nservice_name = \"from-file\"\n")
		turns := otlptest.Named(rcv.Spans(), "tooldispatch.turn")
		if len(turns) != 1 || turns[0].Resource["service.name"] != "from-env" {
			t.Errorf("turn spans: %+v", turns)
		}
	})
	t.Run("exporter none", func(t *testing.T) {
		rcv := startReceiver(t)
		t.Setenv("OTEL_TRACES_EXPORTER", "none")
		run(t, fmt.Sprintf("[telemetry]\ntraces = true\nendpoint = %q\n", rcv.URL()))
		if spans := rcv.Spans(); len(spans) != 0 {
			t.Errorf("OTEL_TRACES_EXPORTER=none: %d spans sent", len(spans))
		}
	})
	t.Run("exporter otlp", func(t *testing.T) {
		rcv := startReceiver(t)
		t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", rcv.TracesURL())
		run(t, "")
		if n := len(otlptest.Named(rcv.Spans(), "tooldispatch.turn")); n != 1 {
			t.Errorf("OTEL_TRACES_EXPORTER=otlp: %d turn spans, want 1", n)
		}
	})
	t.Run("grpc refused", func(t *testing.T) {
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
		e, stdout, stderr := testEnv(strings.NewReader(input))
		code, _ := runInProcess(t, e, stdout, stderr, "--workspace", t.TempDir(), "--data", t.TempDir(),
			"--config", writeConfig(t, "[telemetry]\ntraces = true\n"), "-")
		if code != exitUsage || !strings.Contains(stderr.String(), "http/protobuf") {
			t.Errorf("exit %d: %s", code, stderr.String())
		}
	})
}

// TestRunEnvelopeBadTraceparent: an envelope whose traceparent is not a
// W3C trace context is refused with a message that says so.
func TestRunEnvelopeBadTraceparent(t *testing.T) {
	e, stdout, stderr := testEnv(strings.NewReader(envelope(`"traceparent":"01-xyz"`, calcCall("c1"))))
	code, _ := runInProcess(t, e, stdout, stderr, "--workspace", t.TempDir(), "--data", t.TempDir(), "-")
	if code != exitInput || !strings.Contains(stderr.String(), "not a W3C trace context") {
		t.Errorf("exit %d: %s", code, stderr.String())
	}
}

// TestServeTraceparentHeader: serve traces a turn under the caller's
// traceparent header.
func TestServeTraceparentHeader(t *testing.T) {
	rcv := startReceiver(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50") // milliseconds: send soon
	cfg := writeConfig(t, fmt.Sprintf("[telemetry]\ntraces = true\nendpoint = %q\n", rcv.URL()))
	s := startServe(t, "--workspace", t.TempDir(), "--data", t.TempDir(), "--config", cfg)
	req, _ := http.NewRequest("POST", s.base+"/v1/sessions/traced/turns",
		strings.NewReader(envelope(`"provider":"claude-code","auto_load_schemas":true`, calcCall("c1"))))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", callerTP)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("turn: %d", resp.StatusCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	spans, err := rcv.WaitFor(ctx, func(s []otlptest.Span) bool {
		return len(otlptest.Named(otlptest.Trace(s, callerTrace), "tooldispatch.commit")) == 1
	})
	if err != nil {
		t.Fatalf("the turn's spans never arrived under the header's trace: %v\n%s", err, otlptest.Tree(spans))
	}
	spans = otlptest.Trace(spans, callerTrace)
	if d := otlptest.Named(spans, "tooldispatch.dispatch"); len(d) != 1 || d[0].ParentID != callerSpan {
		t.Errorf("dispatch span not a child of the header's span:\n%s", otlptest.Tree(spans))
	}
}
