package builtin

import (
	"context"
	"errors"
	"io/fs"
	"testing"
)

// TestMemoryVersionsContract: MemoryVersions keeps VersionStore's contract
// as the embedding program's stores do: numbers from 1, oldest first, no
// versions (and no error) for a file without any, and a missing version
// that matches fs.ErrNotExist.
func TestMemoryVersionsContract(t *testing.T) {
	ctx := context.Background()
	var vs VersionStore = NewMemoryVersions()
	if got, err := vs.FileVersions(ctx, "/ws", "a.txt"); err != nil || len(got) != 0 {
		t.Fatalf("FileVersions of a file without versions = %v, %v; want none, nil", got, err)
	}
	for i, content := range []string{"one", ""} {
		n, err := vs.SaveFileVersion(ctx, "/ws", "a.txt", []byte(content), content == "", "edit_file")
		if err != nil || n != int64(i+1) {
			t.Fatalf("SaveFileVersion %d = %d, %v; want %d", i, n, err, i+1)
		}
	}
	got, err := vs.FileVersions(ctx, "/ws", "a.txt")
	if err != nil || len(got) != 2 || got[0].Version != 1 || got[0].Size != 3 || got[1].Version != 2 || !got[1].Deleted {
		t.Fatalf("FileVersions = %+v, %v; want version 1 of 3 bytes, then version 2 deleted", got, err)
	}
	b, info, err := vs.FileVersionContent(ctx, "/ws", "a.txt", 1)
	if err != nil || string(b) != "one" || info.Version != 1 || info.Note != "edit_file" {
		t.Fatalf("FileVersionContent(1) = %q, %+v, %v", b, info, err)
	}
	for _, v := range []int64{0, 3} {
		_, _, err := vs.FileVersionContent(ctx, "/ws", "a.txt", v)
		if !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, ErrVersionNotFound) {
			t.Errorf("FileVersionContent(%d) = %v, want an error matching fs.ErrNotExist and ErrVersionNotFound", v, err)
		}
	}
}
