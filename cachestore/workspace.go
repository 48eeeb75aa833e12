package cachestore

import "path/filepath"

// NormalizeWorkspace cleans a workspace path and makes it absolute (relative
// to the current directory when it is not already): the form every store
// keys file versions by, so two spellings of one directory share them.
func NormalizeWorkspace(workspace string) string {
	if abs, err := filepath.Abs(workspace); err == nil {
		return abs
	}
	return filepath.Clean(workspace)
}
