//go:build linux

package secrets

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// linkCount is how many names the file has.
func linkCount(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Nlink
	}
	return 1
}

// placeKeyFile moves the written key file tmp to path unless path exists
// (then the error matches fs.ErrExist). renameat2's RENAME_NOREPLACE
// keeps the key at one link throughout; a file system without it gets a
// hard link and the removal of tmp, which leaves two links for a moment.
func placeKeyFile(tmp, path string) error {
	err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, path, unix.RENAME_NOREPLACE)
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) {
		return err
	}
	if err := os.Link(tmp, path); err != nil {
		return err
	}
	return os.Remove(tmp)
}
