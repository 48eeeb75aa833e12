package builtin

import (
	"encoding/json"
	"strings"
)

// RunCommandName is the registered name of run_command.
const RunCommandName = "run_command"

// CommandLine shows a run_command call's arguments as a person approving
// it reads them: its argv as one shell-quoted line, or its shell line as
// given; "" when the arguments have neither.
func CommandLine(arguments string) string {
	var a struct {
		Argv  []string `json:"argv"`
		Shell string   `json:"shell"`
	}
	if json.Unmarshal([]byte(arguments), &a) != nil {
		return ""
	}
	if len(a.Argv) == 0 {
		if a.Shell != "" {
			return "sh -c " + shellQuote(a.Shell)
		}
		return ""
	}
	q := make([]string, len(a.Argv))
	for i, w := range a.Argv {
		q[i] = shellQuote(w)
	}
	return strings.Join(q, " ")
}

// shellQuote quotes w for a POSIX shell when it needs it: in single
// quotes, with each single quote written as '\”.
func shellQuote(w string) string {
	if w == "" {
		return "''"
	}
	if strings.IndexFunc(w, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
	}) < 0 {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}
