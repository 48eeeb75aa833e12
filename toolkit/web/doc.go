// Package web holds the tools that reach the network: fetch_page,
// search_web, http_request, download_file and public_api_list.
//
// Every request goes through one outbound Policy: allowed schemes, a
// timeout, a cap on the bytes read, a limit on redirects, and a check of the
// address each connection is about to use. A URL's host is brought to one
// form first (Policy.Target: IDNA Lookup, lower case, no trailing dot,
// canonical IP addresses) and the request is sent to that form, so the
// host the checks and the secrets' origins look at is the host dialled; the
// dialer refuses any other. A Host header must name the URL's host. The check runs in the dialer's
// Control hook, after name resolution and before connect, so a name that
// resolves (or re-resolves, as in DNS rebinding) to a loopback, private,
// link-local, multicast, unspecified or cloud-metadata address is refused
// without any packet being sent, and so is every redirect that leads there.
//
// GET results are cached for CacheTTL (30 minutes, absolute from the first
// write; a hit is never stored again) through a toolkit.Cache: fetch_page
// entries are shared across sessions, search_web and http_request entries
// belong to one session, and a request that carries credentials is never
// cached. fetch_page and search_web write their own entries; http_request
// hands its entry to the dispatcher in Result.Cache, which writes it in the
// turn's commit. Identical calls in flight at the same time share one
// execution, cancelled when the last of them gives up. Every fetch_page and
// search_web result, cached or fresh, goes through a Filter (the "decision
// model"); the default, BM25Filter, keeps the passages most relevant to the
// call's query within a size budget and says what it cut. Page extraction
// is linear in the page (capped by MaxBytes) and stops when its context
// ends.
//
// http_request resolves ${secret:NAME} references from a secrets.Store at
// call time, for the origin of the URL as written (a reference in the
// scheme, user or host is refused), so a secret not bound to that origin
// stops the request before it is sent; a request that carries one follows
// redirects only within its origin. Every tool redacts secret values from
// its results and errors before it cuts anything (a body at max_chars, a
// page into passages, a snippet, an error's excerpt), and cuts outside
// redaction markers. The APIs of the configuration bind their secrets to
// their origins.
//
// The package knows nothing of actors or of how the cache is stored (it must
// not import cachestore); the embedding program wires its store in through
// the two-method CacheStore with CacheFromStore.
package web
