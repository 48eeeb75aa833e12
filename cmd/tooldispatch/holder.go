package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/tooldispatch/tooldispatch/cachestore/badger"
)

// pidFileName is the file in the data directory that says which process
// holds the store while it is open, so a second process refused by
// Badger's directory lock can say who holds it and what to use instead.
const pidFileName = "tooldispatch.pid"

// holderRecord is what the pid file holds.
type holderRecord struct {
	PID     int    `json:"pid"`
	Command string `json:"command"`
	// Addr is serve's listening address, once it listens; TLS says it
	// serves HTTPS there.
	Addr string `json:"addr,omitempty"`
	TLS  bool   `json:"tls,omitempty"`
}

// heldStore is a Badger store this process opened, with the record of its
// holder; Close removes the record, then closes the store.
type heldStore struct {
	*badger.Store
	dir string
	// lastErr is the last error the store logged.
	lastErr *lastStoreError
	once    sync.Once
}

// Close removes the holder record and closes the store.
func (h *heldStore) Close() error {
	h.once.Do(func() { removeHolder(h.dir) })
	return h.Store.Close()
}

// secretFlags are the flags whose values never go into the record: a
// bearer token, and a PostgreSQL URL that may carry a password.
var secretFlags = []string{"token", "postgres"}

// commandLine returns this process's command line with the values of
// secretFlags replaced, and the program named by its base name.
func commandLine() string {
	args := append([]string(nil), os.Args...)
	if len(args) > 0 {
		args[0] = filepath.Base(args[0])
	}
	for i := 1; i < len(args); i++ {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !strings.HasPrefix(args[i], "-") || !isSecretFlag(name) {
			continue
		}
		if hasValue {
			args[i] = args[i][:strings.Index(args[i], "=")+1] + "REDACTED"
		} else if i+1 < len(args) {
			args[i+1] = "REDACTED"
			i++
		}
	}
	return strings.Join(args, " ")
}

func isSecretFlag(name string) bool {
	for _, f := range secretFlags {
		if name == f {
			return true
		}
	}
	return false
}

// writeHolder records this process as the holder of the store in dir.
func writeHolder(dir string, rec holderRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, pidFileName+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, pidFileName))
}

// recordServeAddr adds serve's listening address to the record of the
// store in dir, so whoever is refused the store learns where to ask.
func recordServeAddr(dir, addr string, tls bool) error {
	return writeHolder(dir, holderRecord{PID: os.Getpid(), Command: commandLine(), Addr: addr, TLS: tls})
}

// removeHolder removes the record of dir when it names this process.
func removeHolder(dir string) {
	rec, err := readHolder(dir)
	if err == nil && rec.PID == os.Getpid() {
		_ = os.Remove(filepath.Join(dir, pidFileName))
	}
}

func readHolder(dir string) (holderRecord, error) {
	var rec holderRecord
	b, err := os.ReadFile(filepath.Join(dir, pidFileName))
	if err != nil {
		return rec, err
	}
	err = json.Unmarshal(b, &rec)
	return rec, err
}

// alive reports whether process pid exists.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// isLocked reports whether err is Badger refusing a directory another
// process holds.
func isLocked(err error) bool {
	return errors.Is(err, syscall.EWOULDBLOCK) || strings.Contains(err.Error(), "Cannot acquire directory lock")
}

// storeHeldError is Badger refusing a data directory another process
// holds, explained by the record that process left: which process, and
// what to use instead.
type storeHeldError struct {
	rec     holderRecord
	known   bool  // a record was there
	alive   bool  // the recorded process runs
	err     error // Badger's error
	session string
}

func heldError(dir string, err error) *storeHeldError {
	rec, rerr := readHolder(dir)
	return &storeHeldError{rec: rec, known: rerr == nil, alive: rerr == nil && alive(rec.PID), err: err}
}

func (e *storeHeldError) Unwrap() error { return e.err }

func (e *storeHeldError) Error() string {
	switch {
	case !e.known:
		return fmt.Sprintf("another process holds it (%v); stop that process, or give this command another --data", e.err)
	case !e.alive:
		return fmt.Sprintf("it is locked, but process %d (%s), which recorded itself as its holder, is no longer running: "+
			"another process holds it (%v)", e.rec.PID, e.rec.Command, e.err)
	}
	msg := fmt.Sprintf("process %d (%s) holds it", e.rec.PID, e.rec.Command)
	if e.rec.Addr == "" {
		return msg + "; wait for it to finish, or give this command another --data"
	}
	session := "{session}"
	if e.session != "" {
		session = url.PathEscape(e.session)
	}
	base := "http://" + e.rec.Addr
	if e.rec.TLS {
		base = "https://" + e.rec.Addr
	}
	return msg + fmt.Sprintf("; it serves the sessions on %[1]s: read the session with GET %[1]s/v1/sessions/%[2]s "+
		"and send turns with POST %[1]s/v1/sessions/%[2]s/turns instead", base, session)
}
