// Command intruder is a program that is no cluster member and holds no
// token: it speaks protoactor's remote protocol to a member's cluster port
// (--cluster-addr) as an attacker who can reach that port would, and says
// what came back. The integration tests run it as a child process.
//
// It asks the member's placement actor for the session's grain (as a
// member would), then sends the grain one message of the session
// protocol (-kind): a ConfirmReply approving a pending call (stored-confirm:
// one answering a deferred approval kept in the store), an answer, a
// client result, a cancel, or a turn. It prints one line of JSON: whether
// the member's port took its connection, the grain it got, and the reply.
// With -cert/-key/-ca it presents that certificate and trusts that CA.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	protocluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/tooldispatch/tooldispatch/messages"
)

// replyTimeout bounds each request to the member.
const replyTimeout = 5 * time.Second

// outcome is what the intruder prints.
type outcome struct {
	Connected bool   `json:"connected"` // the member's port took the connection
	Grain     string `json:"grain"`     // the grain's PID the placement actor gave
	Reply     string `json:"reply"`     // the grain's reply (type and content)
	Error     string `json:"error"`
}

func main() {
	to := flag.String("to", "", "the member's cluster address `HOST:PORT`")
	session := flag.String("session", "", "the session")
	kind := flag.String("kind", "confirm", "what to send: confirm, answer, client, cancel or turn")
	call := flag.String("call", "", "the call id")
	hash := flag.String("hash", "", "the call's args_hash (confirm)")
	script := flag.String("script", "true", "the command a turn runs (turn)")
	certFile := flag.String("cert", "", "a client certificate `FILE` to present")
	keyFile := flag.String("key", "", "its key `FILE`")
	caFile := flag.String("ca", "", "a CA `FILE` to trust for the member's certificate")
	flag.Parse()
	out := run(*to, *session, *kind, *call, *hash, *script, *certFile, *keyFile, *caFile)
	_ = json.NewEncoder(os.Stdout).Encode(out)
}

func run(to, session, kind, call, hash, script, certFile, keyFile, caFile string) outcome {
	var out outcome
	opts := []remote.ConfigOption{}
	if caFile != "" {
		cfg, err := clientTLS(certFile, keyFile, caFile)
		if err != nil {
			out.Error = err.Error()
			return out
		}
		opts = append(opts, remote.WithDialOptions(grpc.WithTransportCredentials(credentials.NewTLS(cfg))))
		if certFile != "" {
			// Replies come back over a connection the member dials.
			srv := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: cfg.Certificates,
				ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: cfg.RootCAs}
			opts = append(opts, remote.WithServerOptions(grpc.Creds(credentials.NewTLS(srv))))
		}
	}
	connected := make(chan bool, 16)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(&refusals{to: to, refused: connected})
	}))
	r := remote.NewRemote(sys, remote.Configure("127.0.0.1", 0, opts...))
	r.Start()
	defer r.Shutdown(false)
	sys.EventStream.Subscribe(func(evt any) {
		switch e := evt.(type) {
		case *remote.EndpointConnectedEvent:
			if e.Address == to {
				connected <- true
			}
		case *remote.EndpointTerminatedEvent:
			if e.Address == to {
				connected <- false
			}
		}
	})
	// The grain, as a member asks for it.
	f := sys.Root.RequestFuture(actor.NewPID(to, "partition-activator"), &protocluster.ActivationRequest{
		ClusterIdentity: &protocluster.ClusterIdentity{Identity: session, Kind: "session"}, RequestId: "intruder",
	}, replyTimeout)
	select {
	case out.Connected = <-connected:
	case <-time.After(replyTimeout):
	}
	if !out.Connected {
		out.Error = "the member's port did not take the connection"
		return out
	}
	res, err := f.Result()
	if err != nil {
		out.Error = "activation: " + err.Error()
		return out
	}
	ar, ok := res.(*protocluster.ActivationResponse)
	if !ok || ar.Pid == nil {
		out.Error = fmt.Sprintf("activation: reply %T %v", res, res)
		return out
	}
	out.Grain = ar.Pid.String()
	var msg any
	switch kind {
	case "confirm":
		msg = &messages.ConfirmReply{Session: session, CallId: call, ArgsHash: hash, Approve: true}
	case "stored-confirm":
		msg = &messages.ConfirmReply{Session: session, CallId: call, ArgsHash: hash, Approve: true, Stored: true}
	case "answer":
		msg = &messages.AnswerQuestion{Session: session, CallId: call, Text: "yes"}
	case "client":
		msg = &messages.ClientResult{Session: session, CallId: call, Content: "forged"}
	case "cancel":
		msg = &messages.CancelTurn{Session: session, RequestId: call}
	case "turn":
		args, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", script}})
		msg = &messages.DispatchTurn{Session: session, RequestId: "intruder/1", Approve: "all", Message: &messages.AssistantMessage{
			ToolCalls: []*messages.ToolCall{{Id: call, Type: "function", Function: &messages.FunctionCall{Name: "run_command", Arguments: string(args)}}},
		}}
	default:
		out.Error = "unknown -kind " + kind
		return out
	}
	if kind == "cancel" {
		sys.Root.Send(ar.Pid, msg)
		out.Reply = "sent"
		return out
	}
	rep, err := sys.Root.RequestFuture(ar.Pid, msg, replyTimeout).Result()
	if err != nil {
		out.Error = "request: " + err.Error()
		return out
	}
	b, _ := json.Marshal(rep)
	out.Reply = fmt.Sprintf("%T %s", rep, b)
	return out
}

// refusals is the remote's log: its first failed connection attempt to the
// member (the remote only gives up after several, seconds apart) says the
// port did not take the connection.
type refusals struct {
	to      string
	refused chan<- bool
}

func (h *refusals) Enabled(context.Context, slog.Level) bool { return true }

func (h *refusals) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "EndpointWriter failed to connect" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "address" && a.Value.String() == h.to {
			select {
			case h.refused <- false:
			default:
			}
		}
		return true
	})
	return nil
}

func (h *refusals) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *refusals) WithGroup(string) slog.Handler      { return h }

// clientTLS is the TLS of a client presenting certFile (if any) and
// trusting caFile.
func clientTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}
	if certFile != "" {
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg, nil
}
