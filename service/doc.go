// Package service is the HTTP service of tooldispatch (SPEC section 11): a
// JSON API over an actors.Dispatcher, server-sent event streams of what the
// dispatcher does, Prometheus metrics, and an operator page where a person
// sees the sessions and answers pending confirmations and questions.
//
// The serve command wires it, in this order:
//
//	if err := service.ListenCheck(addr, token); err != nil { … }
//	broker := service.NewBroker(service.BrokerOptions{})
//	metrics := service.NewMetrics(registry)
//	disp, err := actors.New(actors.Config{Registry: registry, Store: store,
//		Events: broker.Publish, Observer: metrics, …})
//	srv, err := service.New(service.Options{Dispatcher: disp, Registry: registry,
//		Store: store, Broker: broker, Metrics: metrics, Token: token, Logger: log})
//	hs := &http.Server{Addr: addr, Handler: srv.Handler(), ReadHeaderTimeout: …}
//	certs, err := service.LoadCertFiles(certFile, keyFile, log) // HTTPS; else warn of service.PlaintextRisk(addr)
//	hs.Serve(tls.NewListener(ln, certs.TLSConfig()))
//
// and shuts it down in this one:
//
//	srv.Shutdown(ctx)    // new turns get 503, event streams end
//	disp.Close(graceCtx) // running turns finish or are canceled, and commit
//	hs.Shutdown(ctx)     // their replies are written
//	store.Close()
//
// A program of its own mounts the handler anywhere in its own server, the
// API, event streams, metrics and operator page together (the page's links
// are relative, so a prefix is fine; see Example_mount):
//
//	mux.Handle("/agent/", http.StripPrefix("/agent", srv.Handler()))
//
// The package knows the dispatcher only through its Go API (actors), the
// tools through toolkit and the persisted sessions through cachestore. It
// opens no store, registers no tool and does not listen: that is the
// command's job. It writes no global state: its metrics have a registry of
// their own (never Prometheus's default), so two servers in one process
// share no session, subscription, budget or counter of theirs. Three of the
// metrics read process-wide state at each scrape and so read the same in
// both: the Go runtime's and the process's collectors, and
// tooldispatch_abandoned_calls_running (actors.AbandonedCalls, the abandoned
// calls of every dispatcher in the process whose tool has not returned).
package service
