package cachestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tooldispatch/tooldispatch/messages"
)

// StatusAwaitingApproval is the status of a committed call whose approval
// was deferred: its Approval record waits in the store until a person
// answers, and the answer amends the message once (SettleApproval).
const StatusAwaitingApproval = "awaiting_approval"

// ErrArgsMismatch: ClaimApproval was given another hash of the arguments
// than the one the approval was asked for; nothing changed.
var ErrArgsMismatch = errors.New("cachestore: the arguments' hash differs from the one asked about")

// Approval is a deferred approval: a call committed awaiting_approval, kept
// until a person answers it, on whatever process, however late. It holds
// everything the answer needs to run the call as it was asked: the
// canonical arguments and their hash, the state of the files its preview
// read, the approval ceiling it was asked under.
type Approval struct {
	Session string `json:"session"`
	Run     string `json:"run"`
	Turn    int64  `json:"turn"`
	CallID  string `json:"call_id"`
	Tool    string `json:"tool"`
	// Arguments are the call's canonical arguments; ArgsHash their hash,
	// which an answer must name.
	Arguments []byte `json:"arguments"`
	ArgsHash  string `json:"args_hash"`
	// State binds the approval to what the preview showed (the content
	// of the files an edit reads); empty when the tool has no preview.
	State string `json:"state,omitempty"`
	// Shown is the arguments as the person is shown them (secrets
	// redacted, clipped); Diff and Note the preview.
	Shown string `json:"shown,omitempty"`
	// Diff and Note are the preview the person is shown.
	Diff string `json:"diff,omitempty"`
	Note string `json:"note,omitempty"`
	// Ceiling is the approval the run had when it asked ("ask").
	Ceiling string `json:"ceiling"`
	// Answerer names who may answer: "confirm" (the confirm API of any
	// member, or Dispatcher.Confirm).
	Answerer string    `json:"answerer"`
	Asked    time.Time `json:"asked"`
	// Claimed: an approving answer took the approval and its call may be
	// running; a store that finds it claimed when its session is loaded
	// again settles the call outcome_unknown.
	Claimed bool `json:"claimed,omitempty"`
}

// Validate names the first missing field of an approval.
func (a *Approval) Validate() error {
	switch {
	case a == nil:
		return errors.New("approval: nil")
	case a.Session == "":
		return errors.New("approval: session is empty")
	case a.CallID == "":
		return errors.New("approval: call_id is empty")
	case a.Tool == "":
		return errors.New("approval: tool is empty")
	case a.ArgsHash == "":
		return errors.New("approval: args_hash is empty")
	case a.Turn < 1:
		return errors.New("approval: turn is not positive")
	}
	return nil
}

// EncodeApproval is the stored form of an approval.
func EncodeApproval(a *Approval) []byte {
	b, _ := json.Marshal(a) // plain fields only: never fails
	return b
}

// DecodeApproval reads a stored approval.
func DecodeApproval(b []byte) (*Approval, error) {
	a := &Approval{}
	if err := json.Unmarshal(b, a); err != nil {
		return nil, fmt.Errorf("decoding approval: %w", ErrCorrupt)
	}
	return a, nil
}

// CloneApproval returns a deep copy.
func CloneApproval(a *Approval) *Approval {
	c := *a
	c.Arguments = slices.Clone(a.Arguments)
	return &c
}

// ApprovalStore keeps deferred approvals. The approvals of a turn are
// written by CommitTurn with the turn (TurnCommit.Approvals), so a call
// committed awaiting_approval always has its record, and its entry of the
// index of what waits (WaitingIndex) beside it: claiming an approval marks
// its entry claimed and settling it deletes the entry, in the same
// transaction.
type ApprovalStore interface {
	// Approvals lists the waiting approvals of a session, or of every
	// session when session is empty, by session and call id. It reads
	// whole records (canonical arguments, bound state): listings for a
	// person read the index (ListWaiting).
	Approvals(ctx context.Context, session string) ([]*Approval, error)
	WaitingIndex
	// ClaimApproval marks the approval of callID claimed, for an approving
	// answer about to run the call, and returns it: ErrNotFound when the
	// session has no such approval (never asked, or settled),
	// ErrAlreadySettled when it was already claimed, ErrArgsMismatch when
	// argsHash is not the one asked about (nothing changes). Stores shared
	// by processes fence it like CommitTurn.
	ClaimApproval(ctx context.Context, session, callID, argsHash string) (*Approval, error)
	// SettleApproval amends the call's awaiting_approval message with m
	// (as AmendToolMessage) and deletes its approval, atomically, and
	// returns the amended turn: ErrAlreadySettled when the message is no
	// longer awaiting_approval, ErrNotFound when there is no such call.
	SettleApproval(ctx context.Context, session, callID string, m *messages.ToolMessage) (*messages.TurnRecord, error)
}

// ClaimedOutcome is the message a claimed approval's call reads when the
// writer that ran it was gone before it settled it.
func ClaimedOutcome(a *Approval) *messages.ToolMessage {
	return &messages.ToolMessage{Role: "tool", ToolCallId: a.CallID, Name: a.Tool, Status: StatusOutcomeUnknown,
		Content: "The call was approved and may have started, but the process running it stopped before its result was " +
			"recorded: its outcome is unknown. Check its effect before calling it again."}
}

// SettleClaimed settles every claimed approval of a session outcome_unknown
// and returns how many it settled: what LoadSession does after resolving
// intents (nobody else writes the session when its writer loads it, so a
// claimed approval is one whose runner is gone), and RecoverAll for every
// session (session empty).
func SettleClaimed(ctx context.Context, s interface {
	Approvals(ctx context.Context, session string) ([]*Approval, error)
	SettleApproval(ctx context.Context, session, callID string, m *messages.ToolMessage) (*messages.TurnRecord, error)
}, session string) (int, error) {
	as, err := s.Approvals(ctx, session)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, a := range as {
		if !a.Claimed {
			continue
		}
		_, err := s.SettleApproval(ctx, a.Session, a.CallID, ClaimedOutcome(a))
		if err != nil && !errors.Is(err, ErrAlreadySettled) {
			return n, fmt.Errorf("settling the claimed approval of call %q of session %q: %w", a.CallID, a.Session, err)
		}
		n++
	}
	return n, nil
}

// CheckApprovals validates the approvals of a commit: each names the
// commit's session and turn and a call of it committed awaiting_approval.
func CheckApprovals(c *TurnCommit) error {
	for _, a := range c.Approvals {
		if err := a.Validate(); err != nil {
			return err
		}
		if a.Session != c.Session || a.Turn != c.Record.GetTurn() {
			return fmt.Errorf("approval of call %q names turn %d of session %q, not the committed turn", a.CallID, a.Turn, a.Session)
		}
		ok := false
		for _, tm := range c.Record.GetToolMessages() {
			if tm.GetToolCallId() == a.CallID && tm.GetStatus() == StatusAwaitingApproval {
				ok = true
			}
		}
		if !ok {
			return fmt.Errorf("approval of call %q: the turn has no call of that id awaiting approval", a.CallID)
		}
	}
	return nil
}

// Claim marks a stored approval claimed by an answer with argsHash: it is
// ErrArgsMismatch for another hash and ErrAlreadySettled for an approval
// claimed before, and changes nothing then. Every store claims through it
// inside its own transaction.
func (a *Approval) Claim(argsHash string) error {
	switch {
	case a.ArgsHash != argsHash:
		return ErrArgsMismatch
	case a.Claimed:
		return ErrAlreadySettled
	}
	a.Claimed = true
	return nil
}
