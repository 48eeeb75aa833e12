package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

const versionUsage = `Usage: tooldispatch version

Print the module version, the VCS commit the binary was built from (with
"+dirty" when the tree had uncommitted changes) and the Go version.
`

// cmdVersion implements "tooldispatch version".
func (e *env) cmdVersion(args []string) error {
	if wantsHelp(args) {
		fmt.Fprint(e.stdout, versionUsage)
		return nil
	}
	if len(args) > 0 {
		fmt.Fprintf(e.stderr, "tooldispatch version: unexpected argument %q\n\n%s", args[0], versionUsage)
		return &exitError{code: exitUsage}
	}
	info, _ := debug.ReadBuildInfo()
	return writeOut(writeVersion(e.stdout, info))
}

// writeVersion writes what info says about the build: the main module's
// version, the commit and its time, whether the tree was dirty, and the Go
// version. A binary built without VCS stamping (go run, go test, or
// -buildvcs=false) says "commit: unknown".
func writeVersion(w io.Writer, info *debug.BuildInfo) error {
	version, goVersion := "(unknown)", runtime.Version()
	settings := map[string]string{}
	if info != nil {
		if info.Main.Version != "" {
			version = info.Main.Version
		}
		if info.GoVersion != "" {
			goVersion = info.GoVersion
		}
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
	}
	commit := "unknown"
	if rev := settings["vcs.revision"]; rev != "" {
		commit = rev
		if settings["vcs.modified"] == "true" {
			commit += "+dirty"
		}
		if t := settings["vcs.time"]; t != "" {
			commit += " (" + t + ")"
		}
	}
	_, err := fmt.Fprintf(w, "tooldispatch %s\ncommit: %s\ngo: %s %s/%s\n", version, commit, goVersion, runtime.GOOS, runtime.GOARCH)
	return err
}

// wantsHelp reports whether args ask for help: -h, -help or --help before
// any "--".
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help", "help":
			return true
		}
	}
	return false
}
