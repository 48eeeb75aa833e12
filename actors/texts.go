package actors

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

func toolMsg(p *callPlan, status toolkit.Status, content string) *messages.ToolMessage {
	return &messages.ToolMessage{Role: "tool", ToolCallId: p.id, Name: p.name, Status: string(status), Content: content}
}

func unknownToolText(name string, view *toolkit.View) string {
	var b strings.Builder
	fmt.Fprintf(&b, "unknown tool %q: no such tool is available in this run.", messages.ClipText(name, 80))
	if cl := toolkit.Closest(name, view.Names(), 3); len(cl) > 0 {
		fmt.Fprintf(&b, " Closest names: %s.", strings.Join(cl, ", "))
	}
	b.WriteString(" Use find_tools to search the available tools.")
	return b.String()
}

func deferredText(name string) string {
	return fmt.Sprintf("%s is not in your tools array, so it cannot be called directly. Fetch its schema with "+
		"find_tools (query \"select:%s\"), then call run_tool with {\"name\": %q, \"arguments\": {...}}.", name, name, name)
}

func schemaReturnedText(t *toolkit.Tool, validationErr error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s did not run: this is the first time you call it in this run, so here is its full schema. "+
		"Call it again with arguments that match.\n", t.Name)
	if validationErr != nil {
		fmt.Fprintf(&b, "Your arguments would not pass: %s\n", validationErr.Error())
	}
	fmt.Fprintf(&b, "description: %s\nparameters: %s", t.Description, t.Schema)
	return b.String()
}

// notApprovedText is the reason of a call skipped because the run's
// approval is none: it names what to set, the ceiling's hint when the
// operator's ceiling is none, else the turn's.
func notApprovedText(cfg *Config) string {
	if cfg.MaxApprove == ApproveNone {
		return "this run does not allow calls that change things: the most any turn gets is none; " + cfg.ApproveHints.Ceiling
	}
	return `this run does not allow calls that change things: its approval is "none"; to have them asked or run, ` + cfg.ApproveHints.Turn
}

func skippedText(reason string) string {
	return "skipped: this call was not approved (" + reason + "); it did not run. " +
		"Do not repeat it unless the user asks you to; find another way or ask the user."
}

// credentialError recognises an error about a missing or rejected credential.
var credentialError = regexp.MustCompile(`(?i)\b(401|403)\b|unauthori[sz]ed|forbidden|api[ _-]?key|missing (key|token|credential)|invalid (key|token|credential)|secret\b.*\bnot found|credential|access token|authentication`)

// nextHint is the line that ends a failed call's text (SPEC section 3).
func nextHint(content string) string {
	if credentialError.MatchString(content) {
		return "next: this looks like a missing or rejected credential; ask the user to store it with store_secret, then reference it as ${secret:NAME}."
	}
	return "next: succeed another way, then record the fix with write_error(outcome=resolved)."
}

// withNext appends the next: line to a failed call's content.
func withNext(m *messages.ToolMessage) {
	switch toolkit.Status(m.Status) {
	case toolkit.StatusError, toolkit.StatusTimeout:
		m.Content = strings.TrimRight(m.Content, "\n") + "\n" + nextHint(m.Content)
	}
}
