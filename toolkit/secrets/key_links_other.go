//go:build !linux

package secrets

import (
	"io/fs"
	"os"
	"syscall"
)

// linkCount is how many names the file has.
func linkCount(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

// placeKeyFile links the written key file tmp to path unless path exists
// (then the error matches fs.ErrExist), and removes tmp.
func placeKeyFile(tmp, path string) error {
	if err := os.Link(tmp, path); err != nil {
		return err
	}
	return os.Remove(tmp)
}
