package cluster

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// TestStaticListsCompared: a member answers its checks with its sorted
// member list, and a member whose listed peer answers with another list
// says so once (a warning naming both lists), again when the peer's list
// changes, and that they agree once they do.
func TestStaticListsCompared(t *testing.T) {
	var logs bytes.Buffer
	s, err := NewStatic(StaticOptions{Listen: "127.0.0.1:0", Peers: []string{"b:2", "a:1", "b:2"}, Logger: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(false)
	s.self = &staticNode{Cluster: "c", ID: "self", Peers: sortedList(s.opts.Peers)}

	rec := httptest.NewRecorder()
	s.serveHealth(rec, httptest.NewRequest(http.MethodGet, staticHealthPath, nil))
	var n staticNode
	if err := json.Unmarshal(rec.Body.Bytes(), &n); err != nil || strings.Join(n.Peers, ",") != "a:1,b:2" {
		t.Fatalf("health answer %s (%v): want the sorted list a:1,b:2", rec.Body.String(), err)
	}

	ps := &peerState{}
	warnings := func() int { return strings.Count(logs.String(), "cluster member lists differ") }
	s.compareLists("b:2", ps, &staticNode{Peers: []string{"a:1", "b:2"}})
	s.compareLists("b:2", ps, &staticNode{}) // a member that does not say its list
	if warnings() != 0 {
		t.Fatalf("the same list (or none) was said to differ:\n%s", logs.String())
	}
	s.compareLists("b:2", ps, &staticNode{Peers: []string{"a:1", "b:2", "c:3"}})
	s.compareLists("b:2", ps, &staticNode{Peers: []string{"a:1", "b:2", "c:3"}})
	if warnings() != 1 || !strings.Contains(logs.String(), `"its_peers":"a:1,b:2,c:3"`) || !strings.Contains(logs.String(), `"these_peers":"a:1,b:2"`) {
		t.Fatalf("a differing list: want one warning naming both lists, got:\n%s", logs.String())
	}
	s.compareLists("b:2", ps, &staticNode{Peers: []string{"b:2"}})
	if warnings() != 2 {
		t.Fatalf("a peer's list that changed again: want a second warning, got:\n%s", logs.String())
	}
	s.compareLists("b:2", ps, &staticNode{Peers: []string{"a:1", "b:2"}})
	if !strings.Contains(logs.String(), "cluster member's list is this member's again") {
		t.Fatalf("lists that agree again are not said:\n%s", logs.String())
	}
}
