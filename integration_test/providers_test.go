package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
)

// TestProviderViews pins the tools array and turn-context text each provider
// gets (SPEC section 4) in testdata/providers/*.json; -update rewrites them.
func TestProviderViews(t *testing.T) {
	w, err := builtin.OpenWorkspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	reg := toolkit.NewRegistry()
	toolkit.RegisterMeta(reg)
	builtin.Register(reg, builtin.Deps{Workspace: w})
	client := []*toolkit.Tool{toolkit.ClientToolFromSpec("show_chart", "Show a chart to the user.", `{"type":"object","properties":{"title":{"type":"string"}}}`)}
	for _, provider := range []string{"openai", toolkit.ProviderClaudeCode} {
		t.Run(provider, func(t *testing.T) {
			v, err := toolkit.NewView(reg, provider, client, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, ft := range v.Array() {
				names = append(names, ft.Function.Name)
			}
			got, err := json.MarshalIndent(map[string]any{"array_names": names, "tools": v.Array(), "context": v.ContextText()}, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join("testdata", "providers", provider+".json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), string(got)+"\n"); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
