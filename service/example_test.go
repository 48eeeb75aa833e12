package service_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/service"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
)

// The service mounted in an embedder's own http.ServeMux under /agent/,
// beside the embedder's other routes: the API, the event streams, the
// metrics and the operator page all answer under the prefix (the page's
// links are relative, so it works there too).
func Example_mount() {
	reg := toolkit.NewRegistry()
	toolkit.RegisterMeta(reg)
	builtin.Register(reg, builtin.Deps{}) // calculate, write_todo, reasoning_guide
	store := cachestore.NewMemory()
	defer store.Close()

	broker := service.NewBroker(service.BrokerOptions{})
	metrics := service.NewMetrics(reg)
	d, err := actors.New(actors.Config{Registry: reg, Store: store, Events: broker.Publish, Observer: metrics})
	if err != nil {
		panic(err)
	}
	srv, err := service.New(service.Options{Dispatcher: d, Registry: reg, Store: store,
		Broker: broker, Metrics: metrics, Approve: actors.ApproveAll})
	if err != nil {
		panic(err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "the embedder's home\n") })
	mux.Handle("/agent/", http.StripPrefix("/agent", srv.Handler()))
	hs := httptest.NewServer(mux) // the embedder's own http.Server in real life
	defer hs.Close()
	defer d.Close(context.Background())
	defer srv.Shutdown(context.Background())

	post := `{"provider":"all","auto_load_schemas":true,"message":{"role":"assistant","tool_calls":[
		{"id":"c1","type":"function","function":{"name":"calculate","arguments":"{\"expression\":\"6*7\"}"}}]}}`
	resp, err := http.Post(hs.URL+"/agent/v1/sessions/s1/turns", "application/json", strings.NewReader(post))
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, strings.Contains(string(body), `"status":"ok"`), strings.Contains(string(body), `"content":"42"`))

	for _, path := range []string{"/agent/", "/agent/static/page.js", "/agent/v1/sessions/s1", "/"} {
		resp, err := http.Get(hs.URL + path)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Println(path, resp.StatusCode, strings.Split(resp.Header.Get("Content-Type"), ";")[0])
	}
	// Output:
	// 200 true true
	// /agent/ 200 text/html
	// /agent/static/page.js 200 text/javascript
	// /agent/v1/sessions/s1 200 application/json
	// / 200 text/plain
}
