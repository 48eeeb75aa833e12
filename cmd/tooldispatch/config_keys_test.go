package main

import (
	"encoding"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/actors"
)

// Every key of the configuration file has its effect (SPEC §16): a key
// that parses and does nothing is a defect. TestConfigKeysHaveTheirEffect
// walks fileConfig by reflection and requires one row of configKeyRows per
// TOML key, so a new key without a row fails it.
//
// To add a key: add its row below, keyed by its dotted path (a field of an
// array of tables is written through the array, "web.apis.name").
//   - When the effect is decided here (the dispatcher's keys, the secrets
//     key file), give effect: a check that shows it, end to end through run
//     and serve where the brief of the key is the dispatcher's.
//   - When the section is handed whole to another package's constructor,
//     give wiredTo: the constructor and the test there that shows the
//     field's effect. The table then checks that a value set in a file
//     reaches the field handed over.
type configKeyRow struct {
	key     string
	effect  func(t *testing.T)
	wiredTo string
}

var configKeyRows = []configKeyRow{
	// [dispatcher]: the effect is here; run and serve share openStack.
	{key: "dispatcher.max_concurrency", effect: func(t *testing.T) {
		settingsFrom(t, "[dispatcher]\nmax_concurrency = 7\n", func(c actors.Config) bool { return c.MaxConcurrency == 7 })
	}},
	{key: "dispatcher.confirm_timeout", effect: testConfigConfirmTimeout},
	{key: "dispatcher.confirm", effect: testConfigConfirm},
	{key: "dispatcher.auto_load_schemas", effect: func(t *testing.T) {
		TestRunConfigAutoLoadSchemas(t)
		TestServeConfigAutoLoadSchemas(t)
	}},
	{key: "dispatcher.exclude", effect: func(t *testing.T) {
		TestRunConfigExcludeIsACeiling(t)
		TestServeConfigExcludeIsACeiling(t)
		TestToolsCommandHonoursConfigExclude(t)
	}},
	{key: "dispatcher.formats", effect: TestRunFormatPolicy},
	{key: "dispatcher.pattern_timeout", effect: TestRunPatternTimeout},
	{key: "dispatcher.pattern_call_budget", effect: TestRunPatternCallBudget},
	{key: "dispatcher.pattern_turn_budget", effect: TestRunPatternTurnBudget},
	{key: "dispatcher.max_turn_bytes", effect: TestTurnLimitOnEveryRoute},
	{key: "dispatcher.max_waiting_approvals", effect: testConfigMaxWaitingApprovals},
	{key: "service.max_inflight_bytes", effect: TestServeInFlightBudget},
	{key: "service.cert_file", effect: func(t *testing.T) {
		TestServeOverTLS(t)
		TestServeReadsTheCertificateAgain(t)
		TestServiceTLSKeysGoTogether(t)
		TestServiceKeyOutOfReach(t)
	}},
	{key: "service.key_file", effect: func(t *testing.T) {
		TestServeOverTLS(t)
		TestServeReadsTheCertificateAgain(t)
		TestServiceTLSKeysGoTogether(t)
		TestServiceKeyOutOfReach(t)
	}},
	{key: "store.min_free", effect: TestMinFree},
	{key: "memory.error_scope", effect: TestRunErrorMemoryScope},
	{key: "secrets.key_file", effect: testConfigSecretsKeyFile},
	{key: "secrets.bind.name", effect: TestConfigBindsSecrets},
	{key: "secrets.bind.origins", effect: TestConfigBindsSecrets},

	// [web]: web.Register(web.Deps{Config: cfg.Web}); effects in toolkit/web tests.
	{key: "web.search_url", wiredTo: "web.Register: search_web's backend (toolkit/web search_test.go)"},
	{key: "web.allow_loopback", wiredTo: "web.Register: the outbound policy (toolkit/web policy_test.go)"},
	{key: "web.allow_private", wiredTo: "web.Register: the outbound policy (toolkit/web policy_test.go)"},
	{key: "web.timeout", wiredTo: "web.Register: per-request timeout (toolkit/web request_test.go)"},
	{key: "web.max_bytes", wiredTo: "web.Register: response cap (toolkit/web request_test.go)"},
	{key: "web.max_redirects", wiredTo: "web.Register: redirect limit (toolkit/web policy_test.go)"},
	{key: "web.download_max_bytes", wiredTo: "web.Register: download_file cap (toolkit/web download_test.go)"},
	{key: "web.download_timeout", wiredTo: "web.Register: download_file timeout (toolkit/web download.go)"},
	{key: "web.user_agent", wiredTo: "web.Register: User-Agent header (toolkit/web request_test.go)"},
	{key: "web.apis.name", wiredTo: "web.Register: public_api_list (toolkit/web apis_test.go)"},
	{key: "web.apis.base_url", wiredTo: "web.Register: public_api_list and auth matching (toolkit/web apis_test.go)"},
	{key: "web.apis.description", wiredTo: "web.Register: public_api_list (toolkit/web apis_test.go)"},
	{key: "web.apis.docs_url", wiredTo: "web.Register: public_api_list (toolkit/web apis_test.go)"},
	{key: "web.apis.auth_header", wiredTo: "web.Register: header added to requests under base_url (toolkit/web apis_test.go)"},
	{key: "web.apis.auth_value", wiredTo: "web.Register: its value, ${secret:…} resolved (toolkit/web apis_test.go)"},
	{key: "web.apis.origins", effect: TestConfigBindsSecrets},

	// [[mcp.servers]]: mcp.NewManager(reg, cfg.MCP.Servers); effects in toolkit/mcp tests.
	{key: "mcp.servers.name", wiredTo: "mcp.NewManager: tool prefix mcp__<name>__ (toolkit/mcp stdio_test.go)"},
	{key: "mcp.servers.command", wiredTo: "mcp.NewManager: stdio server (toolkit/mcp stdio_test.go)"},
	{key: "mcp.servers.url", wiredTo: "mcp.NewManager: Streamable HTTP server (toolkit/mcp http_test.go)"},
	{key: "mcp.servers.env", wiredTo: "mcp.NewManager: the server's environment (toolkit/mcp stdio_test.go)"},
	{key: "mcp.servers.dir", wiredTo: "mcp.NewManager: the server's working directory (toolkit/mcp stdio.go)"},
	{key: "mcp.servers.headers", wiredTo: "mcp.NewManager: HTTP headers (toolkit/mcp http_test.go)"},
	{key: "mcp.servers.trusted", wiredTo: "mcp.NewManager: annotations honoured (toolkit/mcp TestAnnotationsCountOnlyWhenTrusted, stdio_test.go); cleared inside the workspace (TestConfigInsideWorkspaceTrustsNothing)"},
	{key: "mcp.servers.timeout", wiredTo: "mcp.NewManager: per-call timeout (toolkit/mcp stdio_test.go)"},
	{key: "mcp.servers.connect_timeout", wiredTo: "mcp.NewManager: connection timeout (toolkit/mcp config_test.go)"},
	{key: "mcp.servers.ping_interval", wiredTo: "mcp.NewManager: health pings (toolkit/mcp stdio_test.go)"},
	{key: "mcp.servers.max_result_bytes", wiredTo: "mcp.NewManager: result cap (toolkit/mcp config_test.go)"},
	{key: "mcp.servers.hang_timeout", wiredTo: "mcp.NewManager: hung server killed and restarted (toolkit/mcp liveness_test.go TestHungServerIsRestarted)"},
	{key: "mcp.servers.no_dedup", wiredTo: "mcp.NewManager: Tool.NoDedup of the server's tools (toolkit/mcp tools.go)"},
	{key: "mcp.servers.concurrent", wiredTo: "mcp.NewManager: a trusted server's read-only tools concurrent (toolkit/mcp TestAnnotationsCountOnlyWhenTrusted)"},
	{key: "mcp.servers.optional_tasks", wiredTo: "mcp.NewManager: tools of optional task support called as tasks (toolkit/mcp TestOptionalTasks)"},

	// [script] and [ext]: script.Register(reg, script.Config{cfg.Script, cfg.Ext}); effects in toolkit/script tests.
	{key: "script.manifests.path", wiredTo: "script.Register: manifests loaded (toolkit/script)"},
	{key: "script.manifests.trusted", wiredTo: "script.Register: read_only honoured (toolkit/script); cleared inside the workspace"},
	{key: "script.tools.name", wiredTo: "script.Register: tool script_<name> (toolkit/script)"},
	{key: "script.tools.description", wiredTo: "script.Register (toolkit/script)"},
	{key: "script.tools.schema", wiredTo: "script.Register: argument validation (toolkit/script)"},
	{key: "script.tools.command", wiredTo: "script.Register: the command run (toolkit/script)"},
	{key: "script.tools.dir", wiredTo: "script.Register: working directory (toolkit/script)"},
	{key: "script.tools.env", wiredTo: "script.Register: environment (toolkit/script)"},
	{key: "script.tools.timeout", wiredTo: "script.Register: tool timeout (toolkit/script)"},
	{key: "script.tools.concurrent", wiredTo: "script.Register: Tool.Concurrent (toolkit/script)"},
	{key: "script.tools.read_only", wiredTo: "script.Register: Tool.ReadOnly; cleared inside the workspace"},
	{key: "script.tools.max_output", wiredTo: "script.Register: output cap (toolkit/script)"},
	{key: "script.tools.example", wiredTo: "script.Register: test_tool's example (toolkit/interact)"},
	{key: "ext.tools.name", wiredTo: "script.Register: tool ext_<name> (toolkit/script)"},
	{key: "ext.tools.description", wiredTo: "script.Register (toolkit/script)"},
	{key: "ext.tools.schema", wiredTo: "script.Register: argument validation (toolkit/script)"},
	{key: "ext.tools.url", wiredTo: "script.Register: the endpoint posted to (toolkit/script)"},
	{key: "ext.tools.method", wiredTo: "script.Register: HTTP method (toolkit/script)"},
	{key: "ext.tools.headers", wiredTo: "script.Register: HTTP headers (toolkit/script)"},
	{key: "ext.tools.timeout", wiredTo: "script.Register: tool timeout (toolkit/script)"},
	{key: "ext.tools.concurrent", wiredTo: "script.Register: Tool.Concurrent (toolkit/script)"},
	{key: "ext.tools.read_only", wiredTo: "script.Register: Tool.ReadOnly; cleared inside the workspace"},
	{key: "ext.tools.max_output", wiredTo: "script.Register: output cap (toolkit/script)"},
	{key: "ext.tools.example", wiredTo: "script.Register: test_tool's example (toolkit/interact)"},

	// [sandbox]: sandbox.New(cfg.Sandbox, …) in registerTools, handed to run_command and script tools.
	{key: "sandbox.network", effect: TestRunCommandSandboxedEndToEnd},
	{key: "sandbox.read", wiredTo: "sandbox.New: more read-only paths (toolkit/builtin TestRunCommandSandboxListedPaths)"},
	{key: "sandbox.write", wiredTo: "sandbox.New: more writable paths (toolkit/builtin TestRunCommandSandboxListedPaths)"},
	{key: "sandbox.required", wiredTo: "sandbox.New: commands refused without a sandbox (toolkit/builtin TestRunCommandSandboxRequired, toolkit/sandbox TestProtectedInsideAllowedTree)"},

	// [chaos]: actors.Config.Chaos (openStack); effects in toolkit/chaos tests and TestChaosPlanMatchesRunAndReport.
	{key: "chaos.seed", wiredTo: "actors.Config.Chaos: fault draws (toolkit/chaos)"},
	{key: "chaos.rules.tools", wiredTo: "actors.Config.Chaos: which tools a rule hits (toolkit/chaos)"},
	{key: "chaos.rules.faults.kind", wiredTo: "actors.Config.Chaos (toolkit/chaos)"},
	{key: "chaos.rules.faults.probability", wiredTo: "actors.Config.Chaos (toolkit/chaos)"},
	{key: "chaos.rules.faults.text", wiredTo: "actors.Config.Chaos (toolkit/chaos)"},
	{key: "chaos.rules.faults.status", wiredTo: "actors.Config.Chaos (toolkit/chaos)"},
	{key: "chaos.rules.faults.delay", wiredTo: "actors.Config.Chaos (toolkit/chaos)"},
	{key: "chaos.rules.faults.min", wiredTo: "actors.Config.Chaos (toolkit/chaos)"},
	{key: "chaos.rules.faults.max", wiredTo: "actors.Config.Chaos (toolkit/chaos)"},
	{key: "chaos.rules.faults.fraction", wiredTo: "actors.Config.Chaos (toolkit/chaos)"},
	// [[chaos.storage]]: storageChaos (openStores) injects them at the store's seam.
	{key: "chaos.storage.ops", effect: TestRunChaosStorageFaults},
	{key: "chaos.storage.faults.kind", effect: TestRunChaosStorageFaults},
	{key: "chaos.storage.faults.probability", effect: TestRunChaosStorageFaults},
	{key: "chaos.storage.faults.delay", effect: TestRunChaosStorageFaults},
	{key: "chaos.storage.faults.min", effect: TestRunChaosStorageFaults},
	{key: "chaos.storage.faults.max", effect: TestRunChaosStorageFaults},

	// [telemetry]: startTelemetry (openStack) gives actors.Config.Tracer.
	{key: "telemetry.traces", effect: TestRunTracesToOTLP},
	{key: "telemetry.endpoint", effect: TestRunTracesToOTLP},
	{key: "telemetry.service_name", effect: TestRunTracesToOTLP},
	{key: "telemetry.sample_ratio", effect: TestRunTelemetrySampleRatio},

	// [cluster]: routingSettings (serve --cluster) gives the service's
	// Redirect and the address the member advertises; end to end in
	// integration_test TestClusterOwnerRedirect and TestClusterOwnerHeader.
	{key: "cluster.service_url", effect: testConfigClusterServiceURL},
	{key: "cluster.redirect", effect: testConfigClusterRedirect},
	// [cluster] TLS: clusterTLS (clusterOptions) gives actors/cluster
	// Options.TLS; end to end in integration_test TestClusterNonMemberRefused.
	{key: "cluster.ca_file", effect: testConfigClusterTLS},
	{key: "cluster.cert_file", effect: testConfigClusterTLS},
	{key: "cluster.key_file", effect: testConfigClusterTLS},
}

func TestConfigKeysHaveTheirEffect(t *testing.T) {
	keys := configKeys(reflect.TypeFor[fileConfig](), nil)
	rows := map[string]configKeyRow{}
	for _, r := range configKeyRows {
		if _, dup := rows[r.key]; dup {
			t.Errorf("two rows for %s", r.key)
		}
		if (r.effect == nil) == (r.wiredTo == "") {
			t.Errorf("row %s: give effect or wiredTo, not both or neither", r.key)
		}
		rows[r.key] = r
	}
	for _, k := range keys {
		if _, ok := rows[k.dotted()]; !ok {
			t.Errorf("configuration key %s has no row in configKeyRows: show its effect there", k.dotted())
		}
	}
	for _, r := range configKeyRows {
		if !slices.ContainsFunc(keys, func(k configKey) bool { return k.dotted() == r.key }) {
			t.Errorf("row %s names no configuration key", r.key)
		}
	}
	for _, k := range keys {
		r, ok := rows[k.dotted()]
		if !ok {
			continue
		}
		t.Run(k.dotted(), func(t *testing.T) {
			if r.effect != nil {
				r.effect(t)
				return
			}
			checkWired(t, k)
		})
	}
}

// configKey is one TOML key of fileConfig: the path of names from the top,
// whether each name is an array of tables, and the field's type.
type configKey struct {
	path  []string
	array []bool
	typ   reflect.Type
}

func (k configKey) dotted() string { return strings.Join(k.path, ".") }

var (
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	tomlUnmarshaler = reflect.TypeFor[toml.Unmarshaler]()
)

// configKeys lists the keys under a struct type: a field of struct type (or
// pointer to one) is a table, a slice of structs an array of tables, and
// anything else (or a type that decodes itself) a key.
func configKeys(t reflect.Type, parent *configKey) []configKey {
	var out []configKey
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name // BurntSushi/toml matches untagged fields by name
		}
		k := configKey{typ: f.Type}
		if parent != nil {
			k.path, k.array = slices.Clone(parent.path), slices.Clone(parent.array)
		}
		k.path = append(k.path, name)
		ft := f.Type
		isArray := false
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
			ft, isArray = ft.Elem(), true
		}
		k.array = append(k.array, isArray)
		selfDecoding := reflect.PointerTo(ft).Implements(textUnmarshaler) || reflect.PointerTo(ft).Implements(tomlUnmarshaler)
		if ft.Kind() == reflect.Struct && !selfDecoding {
			out = append(out, configKeys(ft, &k)...)
			continue
		}
		out = append(out, k)
	}
	return out
}

// sampleValues are TOML values tried for a key until one decodes into a
// non-zero value.
var sampleValues = []string{`"7s"`, `"x"`, `'{"type":"object"}'`, `7`, `0.5`, `true`, `["x"]`, `{ k = "v" }`}

// checkWired shows that a value set for k in a configuration file reaches
// the field of fileConfig that is handed to its package's constructor.
func checkWired(t *testing.T, k configKey) {
	t.Helper()
	var doc strings.Builder
	for i := range len(k.path) - 1 {
		if k.array[i] {
			doc.WriteString("[[" + strings.Join(k.path[:i+1], ".") + "]]\n")
		}
	}
	if n := len(k.path) - 1; n > 0 && !k.array[n-1] {
		doc.WriteString("[" + strings.Join(k.path[:n], ".") + "]\n")
	}
	head := doc.String()
	for _, v := range sampleValues {
		var cfg fileConfig
		md, err := toml.Decode(head+k.path[len(k.path)-1]+" = "+v+"\n", &cfg)
		if err != nil || len(md.Undecoded()) > 0 {
			continue
		}
		if field(reflect.ValueOf(cfg), k.path).IsZero() {
			continue
		}
		return
	}
	t.Errorf("no value set for %s in a configuration file reaches its field", k.dotted())
}

// field follows path through v (the first element of arrays, pointers).
func field(v reflect.Value, path []string) reflect.Value {
	for _, name := range path {
		for v.Kind() == reflect.Pointer || v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Struct {
			if v.Kind() == reflect.Pointer {
				if v.IsNil() {
					return reflect.Value{}
				}
				v = v.Elem()
				continue
			}
			if v.Len() == 0 {
				return reflect.Value{}
			}
			v = v.Index(0)
		}
		t := v.Type()
		found := false
		for i := range t.NumField() {
			tag, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ",")
			if tag == name || tag == "" && t.Field(i).Name == name {
				v, found = v.Field(i), true
				break
			}
		}
		if !found {
			return reflect.Value{}
		}
	}
	return v
}

// settingsFrom loads body as a configuration file and requires the
// dispatcher settings run and serve hand to actors.New to satisfy ok, with
// and without a flag that overrides nothing.
func settingsFrom(t *testing.T, body string, ok func(actors.Config) bool) {
	t.Helper()
	cfg, err := loadConfig(writeConfig(t, body), t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"run", "serve"} {
		if c := dispatcherSettings(&options{cmd: cmd}, cfg); !ok(c) {
			t.Errorf("%s: the dispatcher gets %+v", cmd, c)
		}
	}
}

// testConfigConfirmTimeout: [dispatcher] confirm_timeout bounds how long a
// call that asks waits, through serve (a run without a terminal never asks).
func testConfigConfirmTimeout(t *testing.T) {
	settingsFrom(t, "[dispatcher]\nconfirm_timeout = \"3m\"\n", func(c actors.Config) bool { return c.ConfirmTimeout == 3*time.Minute })
	ws := t.TempDir()
	cfg := writeConfig(t, "[dispatcher]\nconfirm_timeout = \"1ms\"\n")
	// startServe passes --confirm-timeout 1ms; "0s" leaves the file's value.
	s := startServe(t, "--workspace", ws, "--data", t.TempDir(), "--approve", "ask", "--config", cfg, "--confirm-timeout", "0s")
	code, ms := s.turn(t, "confirm", envelope(`"provider":"claude-code","auto_load_schemas":true`, editCall("e1", "a.txt", "a")))
	if code != 200 || len(ms) != 1 || ms[0].Status != "skipped" || !strings.Contains(ms[0].Content, "no answer within 1ms") {
		t.Errorf("confirm_timeout from the configuration: %d %+v", code, ms)
	}
}

// testConfigConfirm: [dispatcher] confirm = "defer" makes a turn that
// says nothing defer its approvals (committed awaiting_approval at once,
// listed by GET /v1/pending); a turn's own "confirm":"block" still waits;
// another value is refused when the file is read.
func testConfigConfirm(t *testing.T) {
	settingsFrom(t, "[dispatcher]\nconfirm = \"defer\"\n", func(c actors.Config) bool { return c.Confirm == actors.ConfirmDefer })
	if _, err := loadConfig(writeConfig(t, "[dispatcher]\nconfirm = \"later\"\n"), t.TempDir(), zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "dispatcher.confirm") {
		t.Errorf("confirm = \"later\" loaded: %v", err)
	}
	cfg := writeConfig(t, "[dispatcher]\nconfirm = \"defer\"\n")
	s := startServe(t, "--workspace", t.TempDir(), "--data", t.TempDir(), "--approve", "ask", "--config", cfg)
	code, ms := s.turn(t, "confirm", envelope(`"provider":"claude-code","auto_load_schemas":true`, editCall("e1", "a.txt", "a")))
	if code != 200 || len(ms) != 1 || ms[0].Status != "awaiting_approval" {
		t.Errorf("a turn under confirm = \"defer\": %d %+v", code, ms)
	}
	if p := getPending(t, s); len(p.Confirmations) != 1 || !p.Confirmations[0].Deferred {
		t.Errorf("pending under confirm = \"defer\": %+v", p)
	}
	// startServe's confirm timeout is 1ms: a turn that blocks is skipped.
	code, ms = s.turn(t, "confirm", envelope(`"provider":"claude-code","auto_load_schemas":true,"confirm":"block"`, editCall("e2", "b.txt", "b")))
	if code != 200 || len(ms) != 1 || ms[0].Status != "skipped" {
		t.Errorf("a turn saying confirm block under confirm = \"defer\": %d %+v", code, ms)
	}
}

// testConfigMaxWaitingApprovals: [dispatcher] max_waiting_approvals caps
// the deferred approvals kept waiting, every session's together: through
// serve, a turn of three deferred edits under a cap of 2 keeps two waiting
// and commits the third skipped, naming the service's cap, and GET
// /v1/pending lists the two; a negative cap is refused when the file is
// read.
func testConfigMaxWaitingApprovals(t *testing.T) {
	settingsFrom(t, "[dispatcher]\nmax_waiting_approvals = 7\n", func(c actors.Config) bool { return c.MaxWaitingApprovals == 7 })
	if _, err := loadConfig(writeConfig(t, "[dispatcher]\nmax_waiting_approvals = -1\n"), t.TempDir(), zerolog.Nop()); err == nil ||
		!strings.Contains(err.Error(), "dispatcher.max_waiting_approvals") {
		t.Errorf("max_waiting_approvals = -1 loaded: %v", err)
	}
	cfg := writeConfig(t, "[dispatcher]\nconfirm = \"defer\"\nmax_waiting_approvals = 2\n")
	s := startServe(t, "--workspace", t.TempDir(), "--data", t.TempDir(), "--approve", "ask", "--config", cfg)
	code, ms := s.turn(t, "capped", envelope(`"provider":"claude-code","auto_load_schemas":true`,
		editCall("e1", "a.txt", "a"), editCall("e2", "b.txt", "b"), editCall("e3", "c.txt", "c")))
	if code != 200 || len(ms) != 3 || ms[0].Status != "awaiting_approval" || ms[1].Status != "awaiting_approval" ||
		ms[2].Status != "skipped" || !strings.Contains(ms[2].Content, "this service keeps at most 2 calls waiting for approval") {
		t.Errorf("three deferred edits under max_waiting_approvals = 2: %d %+v", code, ms)
	}
	if p := getPending(t, s); len(p.Confirmations) != 2 {
		t.Errorf("pending under max_waiting_approvals = 2: %+v", p)
	}
}

// testConfigSecretsKeyFile: [secrets] key_file is where the secrets' key is
// created.
func testConfigSecretsKeyFile(t *testing.T) {
	key := filepath.Join(t.TempDir(), "elsewhere.key")
	cfg := writeConfig(t, "[secrets]\nkey_file = \""+key+"\"\n")
	data := t.TempDir()
	runTurns(t, envelope(`"auto_load_schemas":true`, `{"id":"c1","type":"function","function":{"name":"calculate","arguments":"{\"expression\":\"1+1\"}"}}`),
		"--workspace", t.TempDir(), "--data", data, "--config", cfg)
	if fi, err := os.Stat(key); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the key file of the configuration: %v %v", fi, err)
	}
	if _, err := os.Stat(filepath.Join(data, "secret.key")); err == nil {
		t.Error("a key was created in the data directory as well")
	}
}

// TestToolsCommandHonoursConfigExclude: "tools" does not show a tool the
// operator excluded, and refuses an exclude name that is no tool.
func TestToolsCommandHonoursConfigExclude(t *testing.T) {
	ws := t.TempDir()
	cfg := writeConfig(t, "[dispatcher]\nexclude = [\"run_command\"]\n")
	for _, all := range [][]string{nil, {"--all"}} {
		e, stdout, stderr := testEnv(nil)
		if code := e.main(append([]string{"tools", "--workspace", ws, "--provider", "claude-code", "--config", cfg}, all...)); code != exitOK {
			t.Fatalf("tools %v: exit %d: %s", all, code, stderr.String())
		}
		if out := stdout.String(); strings.Contains(out, `"run_command"`) || !strings.Contains(out, `"edit_file"`) {
			t.Errorf("tools %v shows the excluded tool: %.300s", all, out)
		}
	}
	e, _, stderr := testEnv(nil)
	bad := writeConfig(t, "[dispatcher]\nexclude = [\"run_comand\"]\n")
	if code := e.main([]string{"tools", "--workspace", ws, "--config", bad}); code != exitUsage ||
		!strings.Contains(stderr.String(), `no tool is named "run_comand"; did you mean run_command`) {
		t.Errorf("a misspelt exclude: exit %d: %s", code, stderr.String())
	}
}

// testConfigClusterServiceURL: [cluster] service_url is the address a
// member advertises; --service-url wins; without either it is the
// listener's (https:// when [service] serves TLS), and a bad URL is
// refused when the file is read.
func testConfigClusterServiceURL(t *testing.T) {
	cfg, err := loadConfig(writeConfig(t, "[cluster]\nservice_url = \"https://m1.example:8443/agent\"\n"), t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	listen := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8123}
	for _, tc := range []struct {
		name string
		o    options
		cfg  *fileConfig
		want string
	}{
		{"file", options{}, cfg, "https://m1.example:8443/agent"},
		{"flag wins", options{serviceURL: "http://m2.example:1"}, cfg, "http://m2.example:1"},
		{"listener", options{}, &fileConfig{}, "http://127.0.0.1:8123"},
		{"all interfaces", options{clusterAddr: "10.1.2.3:7000"}, &fileConfig{}, "http://10.1.2.3:8123"},
		{"listener over TLS", options{}, &fileConfig{Service: serviceConfig{CertFile: "s.pem", KeyFile: "s-key.pem"}}, "https://127.0.0.1:8123"},
	} {
		addr := net.Addr(listen)
		if tc.name == "all interfaces" {
			addr = &net.TCPAddr{IP: net.IPv4zero, Port: 8123}
		}
		r, err := routingSettings(&tc.o, tc.cfg, addr)
		if err != nil || r.serviceURL != tc.want {
			t.Errorf("%s: service URL %q, %v; want %q", tc.name, r.serviceURL, err, tc.want)
		}
	}
	if _, err := loadConfig(writeConfig(t, "[cluster]\nservice_url = \"m1:8080\"\n"), t.TempDir(), zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "cluster.service_url") {
		t.Errorf("a service_url without a scheme: %v, want an error naming cluster.service_url", err)
	}
	if _, err := routingSettings(&options{serviceURL: "ftp://x"}, &fileConfig{}, listen); err == nil {
		t.Error("--service-url ftp://x was accepted")
	}
}

// testConfigClusterRedirect: [cluster] redirect turns redirect mode on, as
// --redirect does.
func testConfigClusterRedirect(t *testing.T) {
	cfg, err := loadConfig(writeConfig(t, "[cluster]\nredirect = true\n"), t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		o    options
		cfg  *fileConfig
		want bool
	}{
		{"file", options{}, cfg, true},
		{"flag", options{redirect: true}, &fileConfig{}, true},
		{"neither", options{}, &fileConfig{}, false},
	} {
		if r, err := routingSettings(&tc.o, tc.cfg, nil); err != nil || r.redirect != tc.want {
			t.Errorf("%s: redirect %v, %v; want %v", tc.name, r.redirect, err, tc.want)
		}
	}
}
