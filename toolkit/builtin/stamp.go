package builtin

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"strconv"
	"strings"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// maxStampHash bounds how much of a file its stamp hashes: larger files are
// stamped by size and modification time alone (any edit through an editor,
// a checkout or a copy changes one of them).
const maxStampHash = 4 << 20

// stampPaths is the Stamp of a file tool: for each path, in order, its size,
// modification time (ns) and the sha256 of its content, or that it is
// missing, a directory, or unreadable. It is the de-duplication fence for
// reads: the same read answers from the run's table only while the stamp
// is unchanged.
func (f *fileTools) stampPaths(paths func(toolkit.Args) []string) func(toolkit.Args) string {
	return func(a toolkit.Args) string {
		var sb strings.Builder
		for _, rel := range paths(a) {
			sb.WriteString(rel)
			sb.WriteByte(0)
			sb.WriteString(f.stampOne(rel))
			sb.WriteByte('\n')
		}
		return sb.String()
	}
}

func (f *fileTools) stampOne(rel string) string {
	fi, err := f.ws.stat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "missing"
	case err != nil:
		return "unreadable"
	case fi.IsDir():
		return "dir " + strconv.FormatInt(fi.ModTime().UnixNano(), 10)
	}
	head := strconv.FormatInt(fi.Size(), 10) + " " + strconv.FormatInt(fi.ModTime().UnixNano(), 10)
	if fi.Size() > maxStampHash || !fi.Mode().IsRegular() {
		return head
	}
	file, err := f.ws.open(rel)
	if err != nil {
		return head + " unreadable"
	}
	defer file.Close()
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(file, maxStampHash+1)); err != nil {
		return head + " unreadable"
	}
	return head + " " + hex.EncodeToString(h.Sum(nil))
}
