// Package secrets keeps the credentials a human hands to tooldispatch
// through the store_secret tool: API keys, tokens, passwords.
//
// Values are encrypted at rest with AES-256-GCM under a key taken from the
// TOOLDISPATCH_SECRET_KEY environment variable (base64 of 32 bytes) or from a
// key file in the data directory, created with mode 0600 on first use (a
// key file with a second name, a hard link that could lie where tools or
// commands read, is refused: ErrKeyFileLinks), and are stored in the "secrets" namespace of a KV (four methods of the
// embedding program's store; the package must not import cachestore). The model
// never sees a value: it refers to one by name as ${secret:NAME}, which
// http_request resolves at call time (Store.Resolve) for one origin. Each
// secret is bound to origins (scheme://host:port): those the human
// confirmed with store_secret, stored with the value, and those the
// operator bound (Store.Bind). A reference in a request to any other
// origin is refused before anything is sent; a secret bound to no origin
// (as every secret stored before origins existed) is sent nowhere. A Redactor replaces
// every known value, and its URL-encoded, JSON-escaped and base64 forms, with
// [secret:NAME]; the dispatcher applies it to every tool message and event
// text.
//
// Processes that share one store (the members of a cluster) open it with
// OpenWith and Options.Shared, so every use reads the record there, and one
// key: SharedKey keeps a key in the store for all of them (the first
// writer's wins), or each is given the same key file, and the store's key
// check refuses a process whose key differs (ErrWrongKey).
//
// No value ever appears in a log line or an error message of this package.
// It knows URL origins, but nothing of actors, of the dispatcher or of HTTP.
package secrets
