package e2e

import (
	"strings"
	"testing"
)

// TestCopiedProjectKeepsImageFolders: a project copied in (sandbox.project =
// "copy", what a remote Engine does) leaves the image's folders above it as
// they are: /tmp of the test image stays 1777 (the copy's archive carried
// an entry of mode 0755 for each folder above the project, which the Engine
// applied to /tmp: a sandbox user could no longer write there).
func TestCopiedProjectKeepsImageFolders(t *testing.T) {
	limit(t)
	e := newEnv(t, outputManifest)
	if !strings.HasPrefix(e.Project, "/tmp/") {
		t.Fatalf("the project %s is not under /tmp (TMPDIR is set): this test needs it there", e.Project)
	}
	r := e.Run("run", "--", "stat", "-c", "%a", "/tmp")
	if r.Code != 0 || strings.TrimSpace(r.Stdout) != "1777" {
		t.Errorf("/tmp in a sandbox whose project under /tmp was copied in: %q, want 1777 (the image's)\n%s", strings.TrimSpace(r.Stdout), r)
	}
}
