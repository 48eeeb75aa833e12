package service

import (
	"net/http"

	"go.opentelemetry.io/otel/propagation"
)

// withTraceContext returns r with the caller's W3C trace context (the
// traceparent and tracestate headers) in its context, where Dispatch finds
// it: the turn's spans (or an answer's, a confirmation's, a client
// result's) are its children. A request without traceparent is
// returned as it is; a header that does not parse is ignored.
func withTraceContext(r *http.Request) *http.Request {
	if r.Header.Get("traceparent") == "" {
		return r
	}
	return r.WithContext(propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
}
