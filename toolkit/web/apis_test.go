package web

import (
	"testing"
)

func TestPublicAPIList(t *testing.T) {
	deps := testDeps(newFakeClock())
	deps.Secrets = openSecrets(t, map[string]string{"GITHUB_TOKEN": tokenValue})
	deps.Config.APIs = []API{
		{Name: "GitHub", BaseURL: "https://api.github.com", Description: "Repositories, issues and pull requests.",
			DocsURL: "https://docs.github.com/rest", AuthHeader: "Authorization", AuthValue: "Bearer ${secret:GITHUB_TOKEN}"},
		{Name: "Open-Meteo", BaseURL: "https://api.open-meteo.com/v1", Description: "Weather forecasts, no key needed."},
		{Name: "Example API", BaseURL: "https://api.example.com", Description: "Example data.", AuthHeader: "X-Api-Key"},
	}
	w := newWeb(t, deps)

	res, err := call(t, w, PublicAPIListName, "s1", obj{})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, res.Content,
		"APIs to call with http_request (3):",
		"- GitHub\n  base_url: https://api.github.com\n  description: Repositories, issues and pull requests.\n  docs: https://docs.github.com/rest\n",
		`auth: header "Authorization": "Bearer ${secret:GITHUB_TOKEN}"`,
		"secret GITHUB_TOKEN: stored",
		"- Open-Meteo\n  base_url: https://api.open-meteo.com/v1\n  description: Weather forecasts, no key needed.\n  auth: none\n",
		`auth: header "X-Api-Key": "${secret:EXAMPLE_API_KEY}"`,
		"secret EXAMPLE_API_KEY: not stored yet; ask the user to store it with store_secret",
	)
	mustNotContain(t, res.Content, tokenValue)

	res, err = call(t, w, PublicAPIListName, "s1", obj{"query": "weather"})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, res.Content, "(1):", "Open-Meteo")
	mustNotContain(t, res.Content, "GitHub")

	res, err = call(t, w, PublicAPIListName, "s1", obj{"query": "stock prices"})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, res.Content, `No API matches "stock prices"`, "GitHub, Open-Meteo, Example API")

	empty := newWeb(t, testDeps(newFakeClock()))
	res, err = call(t, empty, PublicAPIListName, "s1", obj{})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, res.Content, "No APIs are set up")
}

func TestDefaultSecretName(t *testing.T) {
	for in, want := range map[string]string{"GitHub": "GITHUB_KEY", "Example API": "EXAMPLE_API_KEY", "3d-models": "API_3D_MODELS_KEY", "ünï": "N_KEY", "ü": "API_KEY"} {
		if got := defaultSecretName(in); got != want {
			t.Errorf("defaultSecretName(%q) = %q, want %q", in, got, want)
		}
	}
}
