package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/service"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
)

// readHeaderTimeout bounds how long a client may take to send its headers.
const readHeaderTimeout = 10 * time.Second

// cmdServe implements "tooldispatch serve": the HTTP API of SPEC section 11
// until SIGTERM or SIGINT, then a graceful shutdown: new turns get 503,
// running turns finish within --grace or are canceled, every call's result
// is committed, and Badger is closed cleanly.
func (e *env) cmdServe(args []string) error {
	o, err := e.parseFlags("serve", args)
	if err != nil {
		return err
	}
	if o.token == "" {
		o.token = os.Getenv("TOOLDISPATCH_TOKEN")
	}
	if err := service.ListenCheck(o.addr, o.token); err != nil {
		return failf(exitUsage, "--addr %s: %v", o.addr, err)
	}
	if o.approve == "" {
		o.approve = actors.ApproveAsk
	}
	log := newLogger(e.stderr, o.logLevel)
	broker := service.NewBroker(service.BrokerOptions{})
	st, err := openStack(o, log, broker.Publish)
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			st.close(log)
		}
	}()
	warnCAKeys(st.ws, log)
	route, err := routingSettings(o, st.cfg, nil)
	if err != nil {
		return failf(exitUsage, "%v", err)
	}
	srv, err := newService(o, st, broker, route, log)
	if err != nil {
		return err
	}
	ln, scheme, err := serviceListener(o.addr, st.cfg.Service, log)
	if err != nil {
		return err
	}
	if st.member != nil {
		// The other members name this address to clients as the owner of
		// this member's sessions.
		if route, err = routingSettings(o, st.cfg, ln.Addr()); err != nil {
			return failf(exitUsage, "%v", err)
		}
		st.member.Advertise(route.serviceURL)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: readHeaderTimeout, ErrorLog: httpErrorLog(log)}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	if err := recordServeAddr(o.data, ln.Addr().String(), scheme == "https"); err != nil {
		log.Warn().Err(err).Msg("recording the address in the data directory")
	}
	// Signals are taken before the address is announced: whoever reads the
	// announcement may stop the server at once.
	var sigs <-chan os.Signal
	if e.notify != nil {
		c, stop := e.notify()
		defer stop()
		sigs = c
	}
	fmt.Fprintf(e.stderr, "tooldispatch: serving on %s://%s (data %s)\n", scheme, ln.Addr(), o.data)
	code := exitOK
	select {
	case err := <-served:
		return failf(exitFailure, "serving: %v", err)
	case s := <-sigs:
		code = signalExit(s)
		log.Info().Str("signal", s.String()).Msg("shutting down")
	}
	// However the store behaves, the process stops within the grace and
	// the close budget.
	stopWatch := e.watchShutdown(o.grace+closeBudget, log, &st.stages, st.stuckReason)
	defer stopWatch()
	st.stages.set("finishing the running turns")
	// Stop taking turns and end event streams, let running turns finish
	// within the grace period (then cancel them: their results still
	// commit), then let their HTTP replies go out.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), o.grace+closeGrace)
	defer cancel()
	_ = srv.Shutdown(shutdownCtx)
	graceCtx, cancelGrace := context.WithTimeout(context.Background(), o.grace)
	closeErr := st.disp.Close(graceCtx)
	cancelGrace()
	if err := hs.Shutdown(shutdownCtx); err != nil {
		log.Warn().Err(err).Msg("closing HTTP connections")
	}
	<-served
	if closeErr != nil {
		log.Error().Err(closeErr).Msg("closing the dispatcher")
	}
	closed = true
	if err := st.close(log); errors.Is(err, errStoreStuck) {
		return &exitError{code: exitFailure, err: err}
	}
	return &exitError{code: code}
}

// newService makes serve's HTTP service over the stack: a cluster member's
// placement and routing, the free-space guard where turns are admitted.
func newService(o *options, st *stack, broker *service.Broker, route routing, log zerolog.Logger) (*service.Server, error) {
	var placement service.Placement
	admit := st.space
	if st.member != nil {
		placement = memberPlacement{st.member}
		// A member's own disk holds only its result cache, which the
		// guard keeps writing within the floor: its turns are the shared
		// store's.
		admit = nil
	}
	opts := service.Options{
		Dispatcher: st.disp, Registry: st.reg, Store: st.store, Broker: broker, Metrics: st.metrics,
		Token: o.token, AllowOrigins: splitList(o.allowOrigins), Logger: log, Replies: dispatcherReplies{st.disp},
		MaxInFlightBytes: st.cfg.Service.MaxInFlightBytes,
		Approve:          o.approve, Exclude: st.cfg.Dispatcher.Exclude, AutoLoadSchemas: st.cfg.Dispatcher.AutoLoadSchemas,
		Cluster: placement, Redirect: route.redirect && placement != nil, Space: admit,
	}
	if st.chaos != nil {
		opts.TurnAnswered = func(session string, turn int64, code int, summary string) {
			st.chaos.answered(session, turn, fmt.Sprintf("HTTP %d: %s", code, summary))
		}
	}
	srv, err := service.New(opts)
	if err != nil {
		return nil, failf(exitFailure, "starting the service: %v", err)
	}
	return srv, nil
}

// serviceListener listens on addr for the service: over TLS ("https")
// with [service] cert_file and key_file, read again when they change;
// otherwise in the clear ("http"), which is warned of on an address that
// is not loopback: the token and the page's cookie would cross the
// network as they are.
func serviceListener(addr string, cfg serviceConfig, log zerolog.Logger) (net.Listener, string, error) {
	var certs *service.CertFiles
	if cfg.tlsFiles() {
		c, err := service.LoadCertFiles(cfg.CertFile, cfg.KeyFile, log)
		if err != nil {
			return nil, "", failf(exitUsage, "[service] cert_file, key_file: %v", err)
		}
		certs = c
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", failf(exitFailure, "listening on %s: %v", addr, err)
	}
	if certs != nil {
		return tls.NewListener(ln, certs.TLSConfig()), "https", nil
	}
	if risk := service.PlaintextRisk(addr); risk != "" {
		log.Warn().Msg(risk)
	}
	return ln, "http", nil
}

// httpErrorLog passes net/http's own messages to the log: a failed TLS
// handshake (a scanner, a client that does not trust the certificate or
// speaks TLS 1.1, plain HTTP) at debug level, anything else as a warning.
func httpErrorLog(log zerolog.Logger) *stdlog.Logger {
	return stdlog.New(httpLogWriter{log.With().Str("component", "http").Logger()}, "", 0)
}

type httpLogWriter struct{ log zerolog.Logger }

func (w httpLogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	if strings.HasPrefix(msg, "http: TLS handshake error") {
		w.log.Debug().Msg(msg)
	} else {
		w.log.Warn().Msg(msg)
	}
	return len(p), nil
}

// dispatcherReplies answers ask_user questions and client calls through the
// dispatcher.
type dispatcherReplies struct{ d *actors.Dispatcher }

func (r dispatcherReplies) Answer(ctx context.Context, session, callID, text string) error {
	return r.d.Answer(ctx, session, callID, text, false)
}

// AnswerSecret answers store_secret with the value and the origins the
// human kept.
func (r dispatcherReplies) AnswerSecret(ctx context.Context, session, callID, value string, origins []string) error {
	return r.d.AnswerWith(ctx, session, callID, toolkit.Answer{Text: value, Origins: origins})
}

// Decline declines a request for input from an MCP server.
func (r dispatcherReplies) Decline(ctx context.Context, session, callID string) error {
	return r.d.Answer(ctx, session, callID, "", true)
}

func (r dispatcherReplies) ClientResult(ctx context.Context, session, callID, content string, isError bool) error {
	return r.d.ClientResult(ctx, session, callID, content, isError)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// warnCAKeys warns of each CA key "cluster certs" wrote in a
// certificates' directory of the workspace: the file tools keep away from
// it, but whoever gets the cluster's mints member certificates, and
// whoever gets the services' mints certificates their clients trust; a
// workspace is shared with tools, commands and often a repository.
func warnCAKeys(ws *builtin.Workspace, log zerolog.Logger) {
	for _, dir := range ws.MarkedDirs() {
		key := filepath.Join(dir, memberCerts.caKey)
		if _, err := os.Stat(key); err == nil {
			log.Warn().Str("file", key).Msg("a cluster CA key lies in the workspace: whoever reads it can mint a member " +
				"certificate; no tool reads it, but move it off this machine's workspace (members need only ca.pem and " +
				"their own certificate and key; cluster certs --ca-key takes it from elsewhere)")
		}
		key = filepath.Join(dir, serviceCerts.caKey)
		if _, err := os.Stat(key); err == nil {
			log.Warn().Str("file", key).Msg("a service CA key lies in the workspace: whoever reads it can mint a certificate " +
				"the service's clients trust; no tool reads it, but move it off this machine's workspace (the service needs " +
				"only its own certificate and key; cluster certs --service --ca-key takes it from elsewhere)")
		}
	}
}
