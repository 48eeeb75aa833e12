package main

import (
	"cmp"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/cachestore"
)

// flagDefault is what a command's help says a flag defaults to, and the
// value the command really uses when the flag is not given.
type flagDefault struct {
	// doc is the default as the help states it, "(default …)" without
	// the parentheses' "default" and an optional colon; "" when the help
	// states none.
	doc string
	// want is the value doc means under the test's conditions, and real
	// measures the value the command uses, from the options parseFlags
	// returned (and, where the default is decided later, from the code
	// that decides it).
	want string
	real func(t *testing.T, c *defaultsCase) string
}

// defaultsCase is one command parsed with no flags, in a controlled
// environment.
type defaultsCase struct {
	cmd string
	o   *options
	ws  string // the current directory the command sees
	xdg string // $XDG_STATE_HOME
}

// literal is a default the help states as a value.
func literal(v string, real func(*options) string) flagDefault {
	return flagDefault{doc: strconv.Quote(v), want: v, real: func(_ *testing.T, c *defaultsCase) string { return real(c.o) }}
}

// none is a flag whose help states no default: it is off or empty.
func none(real func(*options) string, want string) flagDefault {
	return flagDefault{want: want, real: func(_ *testing.T, c *defaultsCase) string { return real(c.o) }}
}

// defaultOf reads "(default …)" from one flag's help text.
var defaultOf = regexp.MustCompile(`\(default:? ([^)]*)\)`)

// helpDefaults returns the documented default of each flag in cmd's help.
func helpDefaults(t *testing.T, args ...string) map[string]string {
	t.Helper()
	e, stdout, _ := testEnv(strings.NewReader(""))
	if code := e.main(append(args, "--help")); code != exitOK {
		t.Fatalf("%v --help: exit %d", args, code)
	}
	out := map[string]string{}
	name, text := "", ""
	flush := func() {
		if name == "" {
			return
		}
		if m := defaultOf.FindStringSubmatch(text); m != nil {
			out[name] = m[1]
		} else {
			out[name] = ""
		}
	}
	for _, line := range strings.Split(stdout.String(), "\n") {
		switch {
		case strings.HasPrefix(line, "  --"):
			flush()
			name, _, _ = strings.Cut(strings.TrimPrefix(line, "  --"), " ")
			text = ""
		case strings.HasPrefix(line, "    \t"):
			text += " " + strings.TrimPrefix(line, "    \t")
		}
	}
	flush()
	return out
}

// TestFlagDefaultsMatchHelp: for every flag of every command, the default
// its help states is the default the command uses. Each flag of a help
// needs its row here, so a new flag or a changed default is checked too.
func TestFlagDefaultsMatchHelp(t *testing.T) {
	xdg := t.TempDir()
	t.Setenv("XDG_STATE_HOME", xdg)
	ws := t.TempDir()

	workspace := flagDefault{doc: "the current directory", want: ws,
		real: func(_ *testing.T, c *defaultsCase) string { return c.o.workspace }}
	data := flagDefault{doc: "$XDG_STATE_HOME or ~/.local/state, then " + stateDirName + "/NAME-HASH for the workspace",
		want: "$XDG_STATE_HOME/" + stateDirName + "/NAME-HASH",
		real: func(t *testing.T, c *defaultsCase) string {
			prefix := filepath.Join(c.xdg, stateDirName, filepath.Base(c.ws)+"-")
			hash, ok := strings.CutPrefix(c.o.data, prefix)
			if !ok || !regexp.MustCompile(`^[0-9a-f]{12}$`).MatchString(hash) {
				return c.o.data
			}
			return "$XDG_STATE_HOME/" + stateDirName + "/NAME-HASH"
		}}
	provider := literal(defaultProvider, func(o *options) string { return o.provider })
	session := literal(defaultSession, func(o *options) string { return o.session })
	run := flagDefault{doc: "one new run per invocation", want: "a new run per invocation",
		real: func(t *testing.T, c *defaultsCase) string {
			again := parseDefaults(t, c.cmd, c.ws)
			if strings.HasPrefix(c.o.run, "run-") && c.o.run != again.run {
				return "a new run per invocation"
			}
			return c.o.run + " then " + again.run
		}}
	logLevel := literal(defaultLogLevel, func(o *options) string { return o.logLevel.String() })
	shell := none(func(o *options) string { return strconv.FormatBool(o.shell) }, "false")
	fsync := none(func(o *options) string { return strconv.FormatBool(o.fsync) }, "false")
	chaos := none(func(o *options) string { return o.chaos }, "")
	config := flagDefault{doc: "$" + configEnv, want: "$" + configEnv, real: func(t *testing.T, c *defaultsCase) string {
		// The file $TOOLDISPATCH_CONFIG names is the one read: one with
		// an unknown key makes the error.
		file := filepath.Join(t.TempDir(), "from-env.toml")
		if err := os.WriteFile(file, []byte("[dispatcher]\nno_such_key = 1\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv(configEnv, file)
		_, err := loadConfig(c.o.config, c.o.workspace, zerolog.Nop())
		if err != nil && strings.Contains(err.Error(), "no_such_key") {
			return "$" + configEnv
		}
		return fmt.Sprintf("not read (%v)", err)
	}}
	maxConcurrency := flagDefault{doc: "half the CPU cores, at least 3", want: strconv.Itoa(actors.DefaultMaxConcurrency()),
		real: func(_ *testing.T, c *defaultsCase) string {
			return strconv.Itoa(cmp.Or(dispatcherSettings(c.o, &fileConfig{}).MaxConcurrency, actors.DefaultMaxConcurrency()))
		}}
	confirmTimeout := flagDefault{doc: "5m", want: "5m0s", real: func(_ *testing.T, c *defaultsCase) string {
		return cmp.Or(dispatcherSettings(c.o, &fileConfig{}).ConfirmTimeout, actors.DefaultConfirmTimeout).String()
	}}

	minFree := flagDefault{doc: "what the store may still write into its files, 20MiB", want: "20 MiB",
		real: func(t *testing.T, c *defaultsCase) string {
			g, err := spaceGuard(c.o, &fileConfig{}, zerolog.Nop())
			if err != nil || g == nil {
				return fmt.Sprintf("no guard (%v)", err)
			}
			return cachestore.Size(g.Reserve())
		}}

	table := map[string]map[string]flagDefault{
		"run": {
			"workspace": workspace, "data": data, "provider": provider, "session": session, "run": run,
			"log-level": logLevel, "shell": shell, "config": config, "chaos": chaos, "fsync": fsync,
			"max-concurrency": maxConcurrency, "confirm-timeout": confirmTimeout, "min-free": minFree,
			"approve": {doc: "ask when stdin or /dev/tty is a terminal, none otherwise", want: "none without a terminal, ask on one",
				real: func(t *testing.T, c *defaultsCase) string {
					return runApproval(t, false) + " without a terminal, " + runApproval(t, true) + " on one"
				}},
			"events":        {doc: "true", want: "true", real: func(_ *testing.T, c *defaultsCase) string { return strconv.FormatBool(c.o.events) }},
			"openai-strict": none(func(o *options) string { return strconv.FormatBool(o.openAIStrict) }, "false"),
			"pretty": {doc: "when stdout is a terminal; --pretty=false prints JSON Lines", want: "JSON Lines to a pipe, for people on a terminal",
				real: func(_ *testing.T, c *defaultsCase) string {
					word := func(p bool) string {
						if p {
							return "for people"
						}
						return "JSON Lines"
					}
					return word(c.o.pretty.or(false)) + " to a pipe, " + word(c.o.pretty.or(true)) + " on a terminal"
				}},
		},
		"tools": {
			"workspace": workspace, "provider": provider, "log-level": logLevel, "shell": shell, "config": config,
			"all":    none(func(o *options) string { return strconv.FormatBool(o.all) }, "false"),
			"format": literal("openai", func(o *options) string { return string(o.toolsFormat) }),
		},
		"session": {"workspace": workspace, "data": data, "session": session, "log-level": logLevel},
		"serve": {
			"workspace": workspace, "data": data, "log-level": logLevel, "shell": shell, "config": config,
			"chaos": chaos, "fsync": fsync, "max-concurrency": maxConcurrency, "confirm-timeout": confirmTimeout, "min-free": minFree,
			"approve": {doc: "ask: answered over the API or on the operator page", want: "ask (ceiling ask)", real: func(_ *testing.T, c *defaultsCase) string {
				return c.o.approve + " (ceiling " + dispatcherSettings(c.o, &fileConfig{}).MaxApprove + ")"
			}},
			"addr":  literal(defaultAddr, func(o *options) string { return o.addr }),
			"grace": literal("30s", func(o *options) string { return o.grace.String() }),
			"allow-origin": {doc: "none", want: "none", real: func(_ *testing.T, c *defaultsCase) string {
				return cmp.Or(strings.Join(splitList(c.o.allowOrigins), ","), "none")
			}},
			"token": none(func(o *options) string { return o.token }, ""),
			"token-file": {doc: "$TOOLDISPATCH_TOKEN", want: "from $TOOLDISPATCH_TOKEN", real: func(t *testing.T, c *defaultsCase) string {
				t.Setenv("TOOLDISPATCH_TOKEN", "token-from-the-environment")
				s := startServe(t, "--workspace", t.TempDir(), "--data", t.TempDir())
				code := func(header string) int {
					req, _ := http.NewRequestWithContext(t.Context(), "GET", s.base+"/v1/sessions", nil)
					if header != "" {
						req.Header.Set("Authorization", header)
					}
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					return resp.StatusCode
				}
				if code("") == http.StatusUnauthorized && code("Bearer token-from-the-environment") == http.StatusOK {
					return "from $TOOLDISPATCH_TOKEN"
				}
				return "not from the environment"
			}},
			"cluster":         none(func(o *options) string { return o.clusterName }, ""),
			"cluster-addr":    literal("127.0.0.1:0", func(o *options) string { return o.clusterAddr }),
			"peers":           none(func(o *options) string { return o.peers }, ""),
			"automanage-port": none(func(o *options) string { return strconv.Itoa(o.automanagePort) }, "0"),
			"etcd":            none(func(o *options) string { return o.etcd }, ""),
			"redirect":        none(func(o *options) string { return strconv.FormatBool(o.redirect) }, "false"),
			"postgres":        none(func(o *options) string { return o.postgres }, ""),
			"postgres-file": {doc: "$TOOLDISPATCH_PG_URL", want: "$TOOLDISPATCH_PG_URL", real: func(t *testing.T, c *defaultsCase) string {
				// Without the flag and the variable the member refuses to
				// start, naming both.
				t.Setenv("TOOLDISPATCH_PG_URL", "")
				if _, err := clusterStore(c.o, nil, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "$TOOLDISPATCH_PG_URL") {
					return fmt.Sprintf("not named (%v)", err)
				}
				return "$TOOLDISPATCH_PG_URL"
			}},
			"service-url": {doc: "http://ADDR as listened on", want: "http://127.0.0.1:8723", real: func(t *testing.T, c *defaultsCase) string {
				r, err := routingSettings(c.o, &fileConfig{}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8723})
				if err != nil {
					t.Fatal(err)
				}
				return r.serviceURL
			}},
		},
		"chaos-plan": {
			"chaos": chaos, "run": run,
			"first-turn": literal("1", func(o *options) string { return strconv.FormatInt(o.firstTurn, 10) }),
		},
		"chaos-report": {
			"workspace": {doc: "the current directory", want: ws, real: workspace.real}, "data": data, "session": session,
			"run": run, "log-level": logLevel,
			"json": none(func(o *options) string { return strconv.FormatBool(o.json) }, "false"),
		},
	}

	for _, cmd := range flagCommands {
		t.Run(cmd, func(t *testing.T) {
			documented := helpDefaults(t, strings.Split(strings.Replace(cmd, "-", " ", 1), " ")...)
			rows := table[cmd]
			for name := range documented {
				if _, ok := rows[name]; !ok {
					t.Errorf("--%s is in the help but has no row here: add its documented and real default", name)
				}
			}
			for name, row := range rows {
				// A row of its own: a row may set environment variables.
				t.Run(name, func(t *testing.T) {
					doc, ok := documented[name]
					if !ok {
						t.Fatalf("--%s has a row here but is not in the help", name)
					}
					if doc != row.doc {
						t.Fatalf("--%s: the help says (default %s); this table says %q: check the real default and update the row", name, doc, row.doc)
					}
					c := &defaultsCase{cmd: cmd, o: parseDefaults(t, cmd, ws), ws: ws, xdg: xdg}
					if got := row.real(t, c); got != row.want {
						t.Errorf("--%s: the help says (default %s), meaning %q here; the command uses %q", name, doc, row.want, got)
					}
				})
			}
		})
	}
}

// parseDefaults parses cmd's flags with none given, in ws.
func parseDefaults(t *testing.T, cmd, ws string) *options {
	t.Helper()
	e, _, stderr := testEnv(strings.NewReader(""))
	e.getwd = func() (string, error) { return ws, nil }
	o, err := e.parseFlags(cmd, nil)
	if err != nil {
		t.Fatalf("%s with no flags: %v\n%s", cmd, err, stderr.String())
	}
	return o
}

// runApproval is the approval run gives a turn that says none, with or
// without a terminal to ask on: whether an edit_file call is put to the
// terminal (ask) or skipped without asking (none).
func runApproval(t *testing.T, terminal bool) string {
	t.Helper()
	ws := t.TempDir()
	input := `{"provider":"claude-code","auto_load_schemas":true,"message":{"role":"assistant","tool_calls":[` +
		`{"id":"e1","type":"function","function":{"name":"edit_file","arguments":"{\"path\":\"new.txt\",\"content\":\"hi\"}"}}]}}`
	e, stdout, stderr := testEnv(strings.NewReader(input))
	done := make(chan struct{})
	if terminal {
		pr, pw := io.Pipe()
		prompted := make(chan struct{})
		tty := &fakeTTY{PipeReader: pr, signalWriter: &signalWriter{marker: "[y/N]", seen: prompted}, answers: pw}
		e.openTTY = func() (io.ReadWriteCloser, error) { return tty, nil }
		go func() {
			defer close(done)
			<-prompted
			_, _ = io.WriteString(pw, "n\n")
		}()
	} else {
		close(done)
	}
	code, out := runInProcess(t, e, stdout, stderr, "--workspace", ws, "--data", t.TempDir())
	<-done
	if code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
	}
	for _, ev := range out.events {
		if ev.Event == "tool_confirm" {
			return actors.ApproveAsk
		}
	}
	if len(out.results) == 1 && out.results[0].Status == "skipped" {
		return actors.ApproveNone
	}
	return fmt.Sprintf("neither (%v)", out.statuses())
}
