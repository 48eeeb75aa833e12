package service

import (
	"net/http"
	"strings"
	"testing"
)

// TestMountedInOwnMux reruns API, stream, security and page tests against
// the handler mounted under /agent/ of another http.ServeMux with
// http.StripPrefix, the way an embedder serves it beside its own routes.
func TestMountedInOwnMux(t *testing.T) {
	mountPrefix = "/agent"
	defer func() { mountPrefix = "" }()
	for name, test := range map[string]func(*testing.T){
		"WholeRunThroughTheAPI":               TestWholeRunThroughTheAPI,
		"ConfirmationReplayedToNewSubscriber": TestConfirmationReplayedToNewSubscriber,
		"RequestErrors":                       TestRequestErrors,
		"BearerAuth":                          TestBearerAuth,
		"SecurityHeaders":                     TestSecurityHeaders,
		"TurnEventStream":                     TestTurnEventStream,
		"SessionEventsResume":                 TestSessionEventsResume,
		"MetricsScrape":                       TestMetricsScrape,
		"OperatorPageRender":                  TestOperatorPageRender,
		"OperatorPageApprove":                 TestOperatorPageApprove,
		"OperatorPageLogin":                   TestOperatorPageLogin,
		"LoginPage":                           TestLoginPage,
		"LoginAttacks":                        TestLoginAttacks,
		"ConfirmDecidedResumes":               TestConfirmDecidedResumes,
	} {
		t.Run(name, test)
	}

	// The prefix is the handler's: the embedder's other routes stay its own.
	f := newFixture(t, fixtureOpts{})
	resp, err := f.client.Get(f.hs.URL + "/v1/tools")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot {
		t.Errorf("GET /v1/tools outside the prefix: %d, want the embedder's 418", resp.StatusCode)
	}
	if resp, body := f.do("GET", "/", nil); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `src="static/page.js"`) {
		t.Errorf("GET /agent/: %d %.200s", resp.StatusCode, body)
	}
}
