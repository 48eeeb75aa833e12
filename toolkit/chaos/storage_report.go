package chaos

import "time"

// StorageRecord is one line of the storage-fault log a process keeps in
// chaos mode: an injected storage fault (Op set), or what the client of a
// turn was answered (Op empty, Answer set). Answers are recorded only for
// turns that had a fault.
type StorageRecord struct {
	Time    time.Time `json:"time"`
	Op      string    `json:"op,omitempty"`
	Fault   string    `json:"fault,omitempty"`
	Delay   string    `json:"delay,omitempty"`
	Session string    `json:"session,omitempty"`
	Run     string    `json:"run,omitempty"`
	Turn    int64     `json:"turn,omitempty"`
	Key     string    `json:"key,omitempty"`
	Answer  string    `json:"answer,omitempty"`
}

// ReportedStorageFault is an injected storage fault and what the client
// of its turn was answered.
type ReportedStorageFault struct {
	Time    time.Time `json:"time"`
	Op      string    `json:"op"`
	Session string    `json:"session,omitempty"`
	Run     string    `json:"run,omitempty"`
	Turn    int64     `json:"turn,omitempty"`
	Key     string    `json:"key,omitempty"`
	Fault   string    `json:"fault"`
	Delay   string    `json:"delay,omitempty"`
	// Client is what the client of the turn was answered: the HTTP status
	// and error of serve, run's results or exit status. It is empty for an
	// operation that is no turn's (a cache write, an approval's claim) and
	// for a turn whose answer was never given (the process ended first).
	Client string `json:"client,omitempty"`
}

// StorageReport pairs each injected fault of records, a storage-fault log
// in the order it was written, with the answer recorded after it for the
// same session and turn. It lists the faults of session and those about no
// session; with onlyRun set, only those of run.
func StorageReport(records []StorageRecord, session string, onlyRun bool, run string) []ReportedStorageFault {
	rows := []ReportedStorageFault{}
	type turnKey struct {
		session string
		turn    int64
	}
	waiting := map[turnKey][]int{} // rows without an answer yet
	for _, r := range records {
		k := turnKey{r.Session, r.Turn}
		if r.Op == "" {
			for _, i := range waiting[k] {
				rows[i].Client = r.Answer
			}
			delete(waiting, k)
			continue
		}
		if r.Session != session && r.Session != "" || onlyRun && r.Run != run {
			continue
		}
		rows = append(rows, ReportedStorageFault{Time: r.Time, Op: r.Op, Session: r.Session, Run: r.Run, Turn: r.Turn,
			Key: r.Key, Fault: r.Fault, Delay: r.Delay})
		if r.Session != "" && r.Turn > 0 {
			waiting[k] = append(waiting[k], len(rows)-1)
		}
	}
	return rows
}
