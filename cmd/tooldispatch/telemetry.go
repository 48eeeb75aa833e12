package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/tooldispatch/tooldispatch/messages"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// telemetryConfig is the [telemetry] section: OpenTelemetry traces of
// turns and calls, sent over OTLP/HTTP. Off by default. The standard OTEL_*
// environment variables win over the file (docs/CONFIG.md).
type telemetryConfig struct {
	// Traces turns tracing on (OTEL_TRACES_EXPORTER=otlp does too;
	// OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED=true turn it off).
	Traces bool `toml:"traces"`
	// Endpoint is the OTLP/HTTP base URL the traces go to ("/v1/traces" is
	// added), like OTEL_EXPORTER_OTLP_ENDPOINT, which wins over it, as
	// does OTEL_EXPORTER_OTLP_TRACES_ENDPOINT. Default http://localhost:4318
	// (the exporter's own default, https unless OTEL_EXPORTER_OTLP_INSECURE).
	Endpoint string `toml:"endpoint"`
	// ServiceName is the service.name of the spans (default
	// "tooldispatch"); OTEL_SERVICE_NAME wins.
	ServiceName string `toml:"service_name"`
	// SampleRatio is the share of traces started here that are kept, 0 to 1
	// (default 1); a turn whose caller sent a trace context follows the
	// caller's decision. OTEL_TRACES_SAMPLER wins.
	SampleRatio *float64 `toml:"sample_ratio"`
}

// validate names the first bad key.
func (c telemetryConfig) validate() error {
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("telemetry.endpoint %q must be an http or https URL", c.Endpoint)
		}
	}
	if r := c.SampleRatio; r != nil && (*r < 0 || *r > 1) {
		return fmt.Errorf("telemetry.sample_ratio %v must be between 0 and 1", *r)
	}
	return nil
}

// tracerName is the instrumentation scope of tooldispatch's spans.
const tracerName = "github.com/tooldispatch/tooldispatch"

// tracesOn decides from the file and the environment whether to trace.
func (c telemetryConfig) tracesOn() (bool, error) {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false, nil
	}
	switch v := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")); v {
	case "":
		return c.Traces, nil
	case "none":
		return false, nil
	case "otlp":
		return true, nil
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: tooldispatch exports traces with otlp (or none)", v)
	}
}

// startTelemetry returns the tracer of the dispatcher (nil when tracing is
// off) and a shutdown that flushes the spans not yet sent. instance is the
// service.instance.id (a cluster member's address), "" for none.
func startTelemetry(c telemetryConfig, instance string) (trace.Tracer, func(context.Context) error, error) {
	nothing := func(context.Context) error { return nil }
	on, err := c.tracesOn()
	if err != nil || !on {
		return nil, nothing, err
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := os.Getenv(k); p != "" && p != "http/protobuf" {
			return nil, nothing, fmt.Errorf("%s=%q: tooldispatch exports traces over http/protobuf", k, p)
		}
	}
	var opts []otlptracehttp.Option
	if c.Endpoint != "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" {
		opts = append(opts, otlptracehttp.WithEndpointURL(strings.TrimRight(c.Endpoint, "/")+"/v1/traces"))
	}
	// New starts no connection: an unreachable collector costs dropped
	// spans (logged by the SDK), never a failed turn.
	exp, err := otlptracehttp.New(context.Background(), opts...)
	if err != nil {
		return nil, nothing, fmt.Errorf("the OTLP trace exporter: %w", err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", cmp.Or(c.ServiceName, "tooldispatch"))}
	if instance != "" {
		attrs = append(attrs, attribute.String("service.instance.id", instance))
	}
	// Later detectors win: the environment over the file.
	res, err := resource.New(context.Background(), resource.WithAttributes(attrs...), resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, nothing, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(res)}
	if os.Getenv("OTEL_TRACES_SAMPLER") == "" {
		ratio := 1.0
		if c.SampleRatio != nil {
			ratio = *c.SampleRatio
		}
		tpOpts = append(tpOpts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))))
	}
	tp := sdktrace.NewTracerProvider(tpOpts...)
	return tp.Tracer(tracerName), tp.Shutdown, nil
}

// checkTraceparent refuses a traceparent that is not a W3C trace context.
func checkTraceparent(tp string) error {
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return fmt.Errorf("traceparent %q is not a W3C trace context (00-<32 hex trace id>-<16 hex span id>-<2 hex flags>)", messages.ClipText(tp, 80))
	}
	return nil
}
