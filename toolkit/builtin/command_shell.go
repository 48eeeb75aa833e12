package builtin

import (
	"bufio"
	"cmp"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// With shell mode off, run_command refuses argv that makes a shell read a
// command line: the model would otherwise get, through argv, exactly the
// shell mode the operator left off. hiddenShell recognises the ways argv
// can dress a shell up:
//
//   - the shell by any path (/bin/sh, /usr/bin/../bin/bash, ./sh), through
//     a symlink, or as a hard link under another name (the file is one of
//     the system's shells);
//   - the options that make it read a command line: -c in any cluster
//     (-ec, -xc), after other options (-o pipefail, --norc), -s, fish's
//     and nushell's --command, PowerShell's -Command and -EncodedCommand,
//     or no script file at all (it reads standard input, which the call
//     may fill), or a "script" that is standard input (-, /dev/stdin, a
//     symlink to it, a FIFO);
//   - launchers that run another program from their arguments: env (its
//     -S string split into words too), nice, nohup, setsid, stdbuf,
//     timeout, time, chrt, ionice, taskset, prlimit, choom, uclampset,
//     setarch (and its links: linux64, x86_64…), logsave, ssh-agent,
//     start-stop-daemon's --exec or --startas, perf (any argument taken
//     as the program), xargs, find -exec, flock,
//     chroot, unshare, nsenter, sudo, doas, pkexec, setpriv, strace,
//     ltrace, busybox and toybox applets, nested to any depth;
//   - programs that hand their argument to a shell, or start one, whatever
//     the arguments: su, runuser, sg, newgrp, script, scriptlive, watch, capsh,
//     parallel, and the launchers above when given no program (chroot,
//     unshare, sudo -s, …).
//
// A shell script file (sh build.sh), a shell binary copied under another
// name, and other interpreters (python3 -c, perl -e, awk's system(), make)
// still run: shell mode is a matter of the command's shape, not a
// confinement. The sandbox is what confines every command.

// maxLaunchers bounds how deep launchers nest before argv is refused.
const maxLaunchers = 16

// shells are the programs that read a command line after -c (or the like).
var shells = []string{
	"sh", "ash", "dash", "bash", "rbash", "zsh", "ksh", "ksh93", "mksh", "lksh", "pdksh", "oksh", "yash", "posh",
	"hush", "msh", "sash", "csh", "tcsh", "fish", "rc", "es", "elvish", "nu", "xonsh", "osh", "ysh", "ion",
	"pwsh", "powershell",
}

// shellLaunchers always run a shell, or hand it their argument.
var shellLaunchers = []string{"su", "runuser", "sg", "newgrp", "script", "scriptlive", "watch", "capsh", "parallel",
	"tmux", "screen", "bwrap", "firejail", "systemd-run", "run0", "machinectl", "proot"}

// launcher is how a program that runs another one takes its arguments.
type launcher struct {
	valued   string   // short options that take a value (nice -n 5)
	long     []string // long options that take a value when not given with =
	operands int      // operands before the program (timeout's duration)
	shell    string   // short options that start a shell instead (sudo -s)
	bare     bool     // with no program, it starts a shell
}

var launchers = map[string]launcher{
	"nice":             {valued: "n", long: []string{"adjustment"}},
	"nohup":            {},
	"setsid":           {},
	"stdbuf":           {valued: "ioe", long: []string{"input", "output", "error"}},
	"timeout":          {valued: "ks", long: []string{"kill-after", "signal"}, operands: 1},
	"time":             {valued: "fo", long: []string{"format", "output"}},
	"chrt":             {valued: "TPD", long: []string{"sched-runtime", "sched-period", "sched-deadline"}, operands: 1},
	"ionice":           {valued: "cn", long: []string{"class", "classdata"}},
	"taskset":          {operands: 1},
	"xargs":            {valued: "adEILnPs", long: []string{"arg-file", "delimiter", "max-lines", "max-args", "max-procs", "max-chars", "process-slot-var"}},
	"flock":            {valued: "Ew", long: []string{"conflict-exit-code", "timeout"}, operands: 1},
	"chroot":           {long: []string{"userspec", "groups"}, operands: 1, bare: true},
	"unshare":          {valued: "SGRwl", long: []string{"setuid", "setgid", "root", "wd", "map-user", "map-group", "map-users", "map-groups", "propagation", "setgroups", "monotonic", "boottime"}, bare: true},
	"nsenter":          {valued: "tSGrwW", long: []string{"target", "setuid", "setgid", "root", "wd", "wdns"}, bare: true},
	"sudo":             {valued: "ugCDhprtTU", long: []string{"user", "group", "close-from", "chdir", "host", "prompt", "role", "type", "command-timeout", "other-user"}, shell: "si", bare: true},
	"doas":             {valued: "uC", shell: "s", bare: true},
	"pkexec":           {long: []string{"user"}, bare: true},
	"setpriv":          {long: []string{"ruid", "euid", "reuid", "rgid", "egid", "regid", "groups", "inh-caps", "ambient-caps", "bounding-set", "securebits", "pdeathsig", "selinux-label", "apparmor-profile", "landlock-access", "landlock-rule", "seccomp-filter"}},
	"strace":           {valued: "abeEIoOpPsSuXU", long: []string{"output", "signal", "trace", "user", "env", "string-limit"}},
	"ltrace":           {valued: "aAenoOpsSuw", long: []string{"output", "library"}},
	"fakeroot":         {valued: "lsi", long: []string{"lib", "faked"}, bare: true},
	"faketime":         {valued: "f", operands: 1},
	"catchsegv":        {},
	"valgrind":         {},
	"dbus-run-session": {long: []string{"config-file", "dbus-daemon"}},
	"prlimit":          {valued: "po", long: []string{"pid", "output"}},
	"choom":            {valued: "np", long: []string{"adjust", "pid"}},
	"uclampset":        {valued: "mMp", long: []string{"pid"}},
	"logsave":          {operands: 1},
	"ssh-agent":        {valued: "aEOPt"},
	// setarch's architecture operand comes first (skipped in findShell),
	// its options, none with a value, after it. Without a program it
	// starts /bin/sh.
	"setarch": {bare: true},
	// The dynamic loader runs the program it is given.
	"ld.so": {long: []string{"library-path", "preload", "argv0", "audit", "inhibit-rpath", "glibc-hwcaps-mask", "glibc-hwcaps-prepend"}},
}

// hiddenShell returns what makes argv, run in dir, a shell reading a
// command line ("sh" given "-c", "env -S"); "" when it is none.
func hiddenShell(argv []string, dir string) string {
	return findShell(argv, dir, 0)
}

func findShell(argv []string, dir string, depth int) string {
	if len(argv) == 0 {
		return ""
	}
	if depth > maxLaunchers {
		return "launchers nested too deep"
	}
	names := programNames(argv[0], dir)
	args := argv[1:]
	for _, name := range names {
		if strings.HasPrefix(name, "ld-linux") || strings.HasPrefix(name, "ld-musl") {
			name = "ld.so"
		}
		switch {
		case name == "busybox" || name == "toybox":
			if len(args) == 0 {
				return name + " without an applet"
			}
			return findShell(args, dir, depth+1)
		case slices.Contains(shells, name):
			if how := shellReadsCommand(name, args, dir); how != "" {
				return name + " " + how
			}
			return ""
		case slices.Contains(shellLaunchers, name):
			return name + " (it runs a shell)"
		case name == "find":
			return findExec(args, dir, depth)
		case name == "env":
			return envShell(args, dir, depth)
		case name == "start-stop-daemon":
			return startStopDaemon(args, dir, depth)
		case name == "perf":
			return anyProgram(args, dir, depth)
		case name == "setarch" && names[0] == "setarch" && len(args) > 0 && !strings.HasPrefix(args[0], "-"):
			args = args[1:] // the architecture, absent under an architecture's name (linux64)
		}
		if l, ok := launchers[name]; ok {
			if name == "flock" && slices.ContainsFunc(args, func(a string) bool { return a == "-c" || strings.HasPrefix(a, "--command") }) {
				return "flock -c"
			}
			rest, shellOption := l.program(args)
			switch {
			case shellOption:
				return name + " with a shell option"
			case len(rest) == 0 && l.bare:
				return name + " without a program (it starts a shell)"
			}
			return findShell(rest, dir, depth+1)
		}
	}
	return ""
}

// anyProgram checks a launcher whose options are too many to parse (perf
// and its subcommands): the program after "--", else every argument that
// is not an option taken as the program with the rest as its arguments.
func anyProgram(args []string, dir string, depth int) string {
	if i := slices.Index(args, "--"); i >= 0 {
		return findShell(args[i+1:], dir, depth+1)
	}
	for i, a := range args {
		if strings.HasPrefix(a, "-") {
			continue
		}
		if how := findShell(args[i:], dir, depth+1); how != "" {
			return how
		}
	}
	return ""
}

// startStopDaemon checks what start-stop-daemon runs: the program of
// --startas (-a), else of --exec (-x), with the arguments after "--".
func startStopDaemon(args []string, dir string, depth int) string {
	var exe, startas string
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = args[i+1:]
			break
		}
		var value *string
		switch {
		case a == "-x" || a == "--exec":
			value = &exe
		case a == "-a" || a == "--startas":
			value = &startas
		case strings.HasPrefix(a, "--exec="):
			exe = a[len("--exec="):]
		case strings.HasPrefix(a, "--startas="):
			startas = a[len("--startas="):]
		case strings.HasPrefix(a, "-x"):
			exe = a[2:]
		case strings.HasPrefix(a, "-a"):
			startas = a[2:]
		}
		if value != nil && i+1 < len(args) {
			i++
			*value = args[i]
		}
	}
	prog := cmp.Or(startas, exe)
	if prog == "" {
		return ""
	}
	return findShell(append([]string{prog}, rest...), dir, depth+1)
}

// program returns the program and its arguments in args, the arguments
// of launcher l; shellOption reports an option that starts a shell.
func (l launcher) program(args []string) (rest []string, shellOption bool) {
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			i++
			break
		}
		if name, ok := strings.CutPrefix(a, "--"); ok {
			name, _, hasValue := strings.Cut(name, "=")
			if !hasValue && slices.Contains(l.long, name) {
				i++
			}
			if name == "shell" || name == "login" {
				shellOption = l.shell != ""
			}
			continue
		}
		if len(a) < 2 || a[0] != '-' {
			break
		}
		for j := 1; j < len(a); j++ {
			if strings.IndexByte(l.shell, a[j]) >= 0 {
				shellOption = true
			}
			if strings.IndexByte(l.valued, a[j]) >= 0 {
				if j == len(a)-1 {
					i++ // the value is the next argument
				}
				break
			}
		}
	}
	i = min(i+l.operands, len(args))
	return args[i:], shellOption
}

// shellReadsCommand returns how the arguments make shell read a command
// line rather than run a script file: a command option, or no script, or a
// script that is standard input; "" for a script file.
func shellReadsCommand(shell string, args []string, dir string) string {
	if shell == "pwsh" || shell == "powershell" {
		return pwshReadsCommand(args, dir)
	}
	commandLetters := "cs"
	if shell == "fish" {
		commandLetters = "csC"
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-":
			return "reading standard input"
		case a == "--":
			if i+1 >= len(args) {
				return "without a script (it reads standard input)"
			}
			return scriptIsInput(args[i+1], dir)
		case strings.HasPrefix(a, "--"):
			name, _, hasValue := strings.Cut(a[2:], "=")
			if strings.HasPrefix(name, "command") || strings.HasPrefix(name, "init-command") {
				return "given --" + name
			}
			if !hasValue && (name == "rcfile" || name == "init-file") {
				i++
			}
		case len(a) > 1 && (a[0] == '-' || a[0] == '+'):
			letters := a[1:]
			if strings.ContainsAny(letters, commandLetters) {
				return "given " + string(a[0]) + strings.Map(func(r rune) rune {
					if strings.ContainsRune(commandLetters, r) {
						return r
					}
					return -1
				}, letters)
			}
			if last := letters[len(letters)-1]; last == 'o' || last == 'O' {
				i++ // the option's name is the next argument
			}
		default:
			return scriptIsInput(a, dir)
		}
	}
	return "without a script (it reads standard input)"
}

// pwshReadsCommand is shellReadsCommand for PowerShell, whose parameters
// may be shortened to any unique prefix: -Command (-c), -CommandWithArgs
// (-cwa) and -EncodedCommand (-e, -ec) anywhere, or no -File and no .ps1
// script (it reads standard input).
func pwshReadsCommand(args []string, dir string) string {
	script := ""
	for i, a := range args {
		name, ok := strings.CutPrefix(strings.ToLower(a), "-")
		switch {
		case !ok || name == "":
			if script == "" && strings.HasSuffix(strings.ToLower(a), ".ps1") {
				script = a
			}
		case strings.HasPrefix("command", name), strings.HasPrefix("commandwithargs", name), name == "cwa",
			name == "ec", strings.HasPrefix("encodedcommand", name):
			return "given " + a
		case (name == "file" || name == "f") && i+1 < len(args) && script == "":
			script = args[i+1]
		}
	}
	if script == "" {
		return "without a script (it reads standard input)"
	}
	return scriptIsInput(script, dir)
}

// scriptIsInput returns why the script operand of a shell is its standard
// input (-, /dev/stdin, /proc/self/fd/0, a symlink to one, a FIFO or a
// device); "" for anything else, a file that does not exist included.
func scriptIsInput(script, dir string) string {
	p := script
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	const maxLinks = 40
	for range maxLinks {
		if d, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
			p = filepath.Join(d, filepath.Base(p))
		}
		for _, in := range []string{"/proc", "/dev/fd", "/dev/stdin"} {
			if p == in || strings.HasPrefix(p, in+"/") {
				return "reading its script from standard input"
			}
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return ""
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			if !fi.Mode().IsRegular() && !fi.IsDir() {
				return "reading its script from a FIFO or a device"
			}
			return ""
		}
		target, err := os.Readlink(p)
		if err != nil {
			return ""
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p), target)
		}
		p = filepath.Clean(target)
	}
	return "reading its script through too many symlinks"
}

// findExec checks the programs that find's -exec, -execdir, -ok and
// -okdir run (each up to ";" or "+").
func findExec(args []string, dir string, depth int) string {
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "-exec", "-execdir", "-ok", "-okdir":
			j := i + 1
			for j < len(args) && args[j] != ";" && args[j] != "+" {
				j++
			}
			if how := findShell(args[i+1:j], dir, depth+1); how != "" {
				return how
			}
			i = j
		}
	}
	return ""
}

// envShell checks the program env runs: after its options and NAME=VALUE
// assignments, with the words of -S's string put in front of the rest.
func envShell(args []string, dir string, depth int) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return findShell(args[i+1:], dir, depth+1)
		case a == "-":
			continue // -i
		case strings.HasPrefix(a, "--"):
			name, value, hasValue := strings.Cut(a[2:], "=")
			switch name {
			case "split-string":
				if !hasValue {
					if i++; i >= len(args) {
						return ""
					}
					value = args[i]
				}
				return envSplit(value, args[i+1:], dir, depth)
			case "unset", "chdir":
				if !hasValue {
					i++
				}
			}
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				if c := a[j]; c == 'u' || c == 'C' || c == 'S' {
					value := a[j+1:]
					if value == "" {
						if i++; i >= len(args) {
							return ""
						}
						value = args[i]
					}
					if c == 'S' {
						return envSplit(value, args[i+1:], dir, depth)
					}
					break
				}
			}
		case strings.Contains(a, "="):
			continue // NAME=VALUE
		default:
			return findShell(args[i:], dir, depth+1)
		}
	}
	return ""
}

// envSplit checks env -S: the words of s, then rest, are env's arguments.
func envSplit(s string, rest []string, dir string, depth int) string {
	words, ok := splitWords(s)
	if !ok {
		return "env -S with a string it cannot split"
	}
	if depth++; depth > maxLaunchers {
		return "env -S nested too deep"
	}
	return envShell(append(words, rest...), dir, depth)
}

// splitWords splits s the way env -S does: on blanks, with single and
// double quotes and backslash escapes; ok is false for an unclosed quote.
func splitWords(s string) (words []string, ok bool) {
	var cur strings.Builder
	inWord := false
	var quote rune
	escaped := false
	for _, r := range s {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case r == '\\' && quote != '\'':
			escaped, inWord = true, true
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, quote == 0 && !escaped
}

// programNames are the names argv0 goes by, run in dir: its base name, the
// base name of the file it resolves to (symlinks followed), and the name
// of the system's shell that file is (a hard link under another name).
func programNames(argv0, dir string) []string {
	names := []string{filepath.Base(argv0)}
	path := argv0
	switch {
	case strings.Contains(argv0, "/"):
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
	default:
		lp, err := exec.LookPath(argv0)
		if err != nil {
			return names
		}
		path = lp
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		names = append(names, filepath.Base(real))
		path = real
	}
	if fi, err := os.Stat(path); err == nil {
		if id, _, ok := idOf(fi); ok {
			if name, ok := systemShells()[id]; ok {
				names = append(names, name)
			}
		}
	}
	return names
}

// systemShells maps the files of this system's shells (found on PATH and
// in /etc/shells) to their names.
var systemShells = sync.OnceValue(func() map[fileID]string {
	out := map[fileID]string{}
	add := func(path string) {
		real, err := filepath.EvalSymlinks(path)
		if err != nil {
			return
		}
		name := filepath.Base(real)
		if !slices.Contains(shells, name) && !slices.Contains(shells, filepath.Base(path)) {
			return
		}
		if fi, err := os.Stat(real); err == nil {
			if id, _, ok := idOf(fi); ok {
				out[id] = name
			}
		}
	}
	for _, name := range shells {
		if p, err := exec.LookPath(name); err == nil {
			add(p)
		}
	}
	if f, err := os.Open("/etc/shells"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, "/") {
				add(line)
			}
		}
	}
	return out
})
