package backend

import (
	"errors"
	"strings"
	"testing"
)

// TestKindOfExtractError: the Engines' words for an entry replacing a folder by a
// file or the other way round name the sandbox's path: Engine 20.10 gives it
// whole, a current Engine relative to the extraction point, which it names
// second.
func TestKindOfExtractError(t *testing.T) {
	for _, c := range []struct {
		msg, want string
		kind      error
	}{
		{`Error response from daemon: cannot overwrite directory "/tmp" with non-directory "/tmp"`, "/tmp is a folder", ErrIsDirectory},
		{`Error response from daemon: cannot overwrite directory "tmp" with non-directory "/"`, "/tmp is a folder", ErrIsDirectory},
		{`Error response from daemon: cannot overwrite directory "b/c" with non-directory "/a"`, "/a/b/c is a folder", ErrIsDirectory},
		{`Error response from daemon: cannot overwrite non-directory "/etc/passwd" with directory "/etc/passwd"`, "/etc/passwd is a file", ErrNotDirectory},
		{`Error response from daemon: cannot overwrite non-directory "passwd" with directory "/etc"`, "/etc/passwd is a file", ErrNotDirectory},
		{`extraction point is not a directory`, "below a file", ErrNotDirectory},
	} {
		err := KindOfExtractError("/", c.msg)
		if err == nil || !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("KindOfExtractError(%q) = %v, want %v naming %q", c.msg, err, c.kind, c.want)
		}
	}
	if err := KindOfExtractError("/", "no space left on device"); err != nil {
		t.Errorf("another error is not the caller's mistake: %v", err)
	}
}
