package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// shBlocks returns the ```sh blocks of a Markdown file, in order.
func shBlocks(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?ms)^```sh\n(.*?)^```\n").FindAllStringSubmatch(string(b), -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// TestClusterRunbook runs docs/CLUSTER.md as an operator would: every sh
// block, in order, as one bash script from the repository's root, with
// $TD a temp folder: it builds the binary, starts PostgreSQL and three
// members with certificates, sends turns, reads the metrics, restarts each
// member in turn with SIGTERM, SIGKILLs one, backs the store up and
// restores it, and stops everything. The checkout is left as it was, and
// no member logs anything above INFO.
func TestClusterRunbook(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	if matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl"); len(matches) == 0 || os.Getenv("TOOLDISPATCH_PG_URL") == "skip" {
		t.Skip("PostgreSQL not installed: .ci/run installs the postgresql package")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl not installed")
	}
	blocks := shBlocks(t, "../docs/CLUSTER.md")
	if len(blocks) < 8 {
		t.Fatalf("docs/CLUSTER.md has %d sh blocks", len(blocks))
	}
	before, _ := exec.Command("git", "-C", "..", "status", "--porcelain", "--untracked-files=all").Output()
	td := t.TempDir()
	script := strings.Join(blocks, "\n")
	cmd := exec.Command("bash", "-xeuo", "pipefail", "-c", script)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "TD="+td)
	cmd.Env = slicesWithout(cmd.Env, "TOOLDISPATCH_PG_URL=")
	out, err := cmd.CombinedOutput()
	t.Cleanup(func() {
		// Whatever the script left running.
		pids, _ := filepath.Glob(filepath.Join(td, "m*.pid"))
		for _, p := range pids {
			if pid, err := strconv.Atoi(strings.TrimSpace(readFile(p))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if lines := strings.Split(readFile(filepath.Join(td, "pg.txt")), "\n"); len(lines) > 1 && lines[1] != "" {
			_ = exec.Command("../scripts/pg-test-server.sh", "stop", lines[1]).Run()
		}
	})
	if err != nil {
		logs, _ := filepath.Glob(filepath.Join(td, "m*.log"))
		for _, l := range logs {
			t.Logf("%s:\n%s", l, readFile(l))
		}
		t.Fatalf("the runbook failed: %v\n%s", err, out)
	}
	after, _ := exec.Command("git", "-C", "..", "status", "--porcelain", "--untracked-files=all").Output()
	if string(after) != string(before) {
		t.Errorf("the runbook changed the checkout:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	for i := 0; i < 3; i++ {
		for _, line := range strings.Split(readFile(filepath.Join(td, "m"+strconv.Itoa(i)+".log")), "\n") {
			if strings.Contains(line, " WRN ") || strings.Contains(line, " ERR ") || strings.Contains(line, "panic") {
				t.Errorf("member %d logged: %s", i, line)
			}
		}
	}
}

// slicesWithout returns env without the variables named by prefix.
func slicesWithout(env []string, prefix string) []string {
	var out []string
	for _, e := range env {
		if !strings.HasPrefix(e, prefix) {
			out = append(out, e)
		}
	}
	return out
}
