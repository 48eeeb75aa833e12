package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cmd/tooldispatch/internal/service"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
)

const (
	// dataDirMode is the mode of a data directory the command creates: it
	// holds sessions and file versions, which are nobody else's business.
	dataDirMode os.FileMode = 0o700
	// closeGrace is how long closing waits for turns still running before
	// it cancels them.
	closeGrace = 10 * time.Second
)

// newLogger returns the logger of one invocation: human-readable lines on
// w at level and above.
func newLogger(w io.Writer, level zerolog.Level) zerolog.Logger {
	cw := zerolog.ConsoleWriter{Out: w, NoColor: true, TimeFormat: time.RFC3339}
	return zerolog.New(cw).Level(level).With().Timestamp().Logger()
}

// openWorkspace opens the --workspace directory. A missing directory is a
// usage error.
func openWorkspace(dir string) (*builtin.Workspace, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, failf(exitUsage, "--workspace: %v", err)
	}
	if !fi.IsDir() {
		return nil, failf(exitUsage, "--workspace %s is not a directory", dir)
	}
	ws, err := builtin.OpenWorkspace(dir)
	if err != nil {
		return nil, failf(exitUsage, "--workspace: %v", err)
	}
	return ws, nil
}

// newRegistry returns a registry with the meta tools and the built-in tools
// working in ws. versions may be nil (versions then live in memory).
func newRegistry(ws *builtin.Workspace, versions builtin.Versions, shell bool, log zerolog.Logger) *toolkit.Registry {
	reg := toolkit.NewRegistry()
	toolkit.RegisterMeta(reg)
	builtin.Register(reg, builtin.Deps{Workspace: ws, Versions: versions, Shell: shell, Logger: log})
	return reg
}

// openStore opens the Badger store in dir, creating the directory when
// create is set.
func openStore(dir string, create, fsync bool, log zerolog.Logger) (*cachestore.Badger, error) {
	if create {
		if err := os.MkdirAll(dir, dataDirMode); err != nil {
			return nil, fmt.Errorf("creating the data directory: %w", err)
		}
	}
	return cachestore.OpenBadger(cachestore.BadgerOptions{Dir: dir, SyncWrites: fsync, Small: true, Logger: log})
}

// stack is what run works with: the workspace, the store, the registry and
// the dispatcher, opened in that order and closed in reverse.
type stack struct {
	ws      *builtin.Workspace
	store   cachestore.Store
	reg     *toolkit.Registry
	disp    *actors.Dispatcher
	metrics *service.Metrics // serve only
}

// openStack opens everything run needs. events receives the dispatcher's
// events (it must not block).
func openStack(o *options, log zerolog.Logger, events func(*messages.Event)) (*stack, error) {
	ws, err := openWorkspace(o.workspace)
	if err != nil {
		return nil, err
	}
	s := &stack{ws: ws}
	store, err := openStore(o.data, true, o.fsync, log)
	if err != nil {
		s.close(log)
		return nil, failf(exitFailure, "opening the store in %s: %v", o.data, err)
	}
	s.store = store
	// File versions live in the store, so restore_file works across
	// invocations.
	s.reg = newRegistry(ws, builtin.StoreVersions(store), o.shell, log)
	var observer toolkit.Observer
	if o.cmd == "serve" {
		s.metrics = service.NewMetrics(s.reg)
		observer = s.metrics
	}
	s.disp, err = actors.New(actors.Config{
		Observer:       observer,
		Registry:       s.reg,
		Store:          store,
		Logger:         log,
		MaxConcurrency: o.maxConcurrency,
		Events:         events,
		ConfirmTimeout: o.confirmTimeout,
	})
	if err != nil {
		s.close(log)
		return nil, failf(exitFailure, "starting the dispatcher: %v", err)
	}
	return s, nil
}

// close stops the dispatcher (waiting up to closeGrace for running turns),
// then closes the store and the workspace. Failures are logged: by then the
// results are written.
func (s *stack) close(log zerolog.Logger) error {
	var errs []error
	if s.disp != nil {
		ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
		if err := s.disp.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("closing the dispatcher: %w", err))
		}
		cancel()
	}
	if s.store != nil {
		if err := s.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing the store: %w", err))
		}
	}
	if s.ws != nil {
		if err := s.ws.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing the workspace: %w", err))
		}
	}
	err := errors.Join(errs...)
	if err != nil {
		log.Error().Err(err).Msg("shutting down")
	}
	return err
}
