package actors

import "github.com/asynkron/protoactor-go/actor"

// shared is what every actor of one dispatcher reads: the Config with its
// defaults filled in, and the wiring the constructors add, which is not
// the embedder's to set. Immutable after start; actors hold a pointer to
// it (one Config for the whole tree, not a copy per actor).
type shared struct {
	Config
	// board holds the questions tools wait on (ask_user, store_secret):
	// the session actor hands it the answers.
	board *questionBoard
	// member: a cluster member (NewRouted); turn results name it.
	member bool
	// drain follows the turns of the session actors a router hosts
	// (NewRouted only; nil otherwise).
	drain *drainBoard
	// workers runs the mailboxes of the dispatcher's actors (all but the
	// pool's) on kept goroutines; Dispatcher.Close lets them go.
	workers *workerDispatcher
}

// props are the props of one of the dispatcher's actors: its mailbox runs
// on the kept workers.
func (cfg *shared) props(producer actor.Producer, opts ...actor.PropsOption) *actor.Props {
	return actor.PropsFromProducer(producer, append(opts, actor.WithDispatcher(cfg.workers))...)
}

// start checks cfg and fills in its defaults and what the dispatcher's
// actors share.
func (cfg Config) start() (*shared, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &shared{Config: cfg.withDefaults(), board: newQuestionBoard(), workers: newWorkerDispatcher()}, nil
}
