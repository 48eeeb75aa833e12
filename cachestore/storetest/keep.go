package storetest

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// KeepDir copies a data directory a test could not open or read into a new
// directory under the system's temporary directory, which outlives the
// test, and returns a text saying where it is and listing its files with
// their sizes, for the failure message.
func KeepDir(dir string) string {
	kept, err := os.MkdirTemp("", "tooldispatch-kept-")
	if err != nil {
		return "data directory not kept: " + err.Error()
	}
	var list strings.Builder
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(&list, "  %s %d bytes\n", rel, len(b))
		if err := os.MkdirAll(filepath.Dir(filepath.Join(kept, rel)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(kept, rel), b, 0o644)
	})
	if err != nil {
		return fmt.Sprintf("data directory partly kept in %s (%v):\n%s", kept, err, list.String())
	}
	return fmt.Sprintf("data directory kept in %s:\n%s", kept, list.String())
}
