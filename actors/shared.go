package actors

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
}

// start checks cfg and fills in its defaults and what the dispatcher's
// actors share.
func (cfg Config) start() (*shared, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &shared{Config: cfg.withDefaults(), board: newQuestionBoard()}, nil
}
