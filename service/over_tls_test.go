package service

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestOverTLS reruns API, stream, confirmation, login and page tests —
// Chromium's among them — against the service served over HTTPS the way
// serve serves it (tls.NewListener with CertFiles' configuration, a
// certificate of a CA the test made, HTTP/2 where the client speaks it).
// The login's cookie is Secure there (TestLoginPage, TestOperatorPageLogin
// check it against overTLS), and Chromium trusts the certificate only
// through its key's hash (--ignore-certificate-errors-spki-list).
func TestOverTLS(t *testing.T) {
	overTLS = true
	defer func() { overTLS = false }()
	for name, test := range map[string]func(*testing.T){
		"WholeRunThroughTheAPI":               TestWholeRunThroughTheAPI,
		"ConfirmationReplayedToNewSubscriber": TestConfirmationReplayedToNewSubscriber,
		"ConfirmAnswerIsBoundAndUsedOnce":     TestConfirmAnswerIsBoundAndUsedOnce,
		"ConfirmDecidedResumes":               TestConfirmDecidedResumes,
		"TurnEventStream":                     TestTurnEventStream,
		"SessionEventsResume":                 TestSessionEventsResume,
		"ConcurrentStreamsOfOneSession":       TestConcurrentStreamsOfOneSession,
		"ClientDisconnectCancelsTurn":         TestClientDisconnectCancelsTurn,
		"RequestErrors":                       TestRequestErrors,
		"BearerAuth":                          TestBearerAuth,
		"SecurityHeaders":                     TestSecurityHeaders,
		"LoginPage":                           TestLoginPage,
		"LoginAttacks":                        TestLoginAttacks,
		"CopiedCookieIsNotABearerToken":       TestCopiedCookieIsNotABearerToken,
		"LogoutEndsThatLoginOnly":             TestLogoutEndsThatLoginOnly,
		"OperatorPageRender":                  TestOperatorPageRender,
		"OperatorPageApprove":                 TestOperatorPageApprove,
		"OperatorPageLogin":                   TestOperatorPageLogin,
		"OperatorPageDeferredApproval":        TestOperatorPageDeferredApproval,
	} {
		t.Run(name, test)
	}

	f := newFixture(t, fixtureOpts{token: testToken})
	t.Run("HTTP/2", func(t *testing.T) {
		resp, body := f.do("GET", "/v1/tools", nil)
		if resp.StatusCode != http.StatusOK || resp.Proto != "HTTP/2.0" || resp.TLS == nil || resp.TLS.Version < MinTLSVersion {
			t.Errorf("GET /v1/tools over TLS: %d %s %+v %.100s", resp.StatusCode, resp.Proto, resp.TLS, body)
		}
	})
	t.Run("plain HTTP to the TLS port", func(t *testing.T) {
		c, err := net.DialTimeout("tcp", f.hs.Listener.Addr().String(), testTimeout)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.SetDeadline(time.Now().Add(testTimeout)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte("GET /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + testToken + "\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		status, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || !strings.HasPrefix(status, "HTTP/1.0 400 ") {
			t.Errorf("a plain HTTP request to the TLS port got %q (%v), want 400 and nothing served", status, err)
		}
	})
}
