package execs

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/internal/ids"
)

// TestExecPaths: the output files of an API exec are the root joined with the
// template expanded; an ID that is not an airlock ID, or a template that would
// leave the root, is refused.
func TestExecPaths(t *testing.T) {
	root := t.TempDir()
	out, errf, err := outputPaths(root, "{sandbox_id}/{exec_id}", "sb-1", "ex-1")
	if err != nil || out != filepath.Join(root, "sb-1", "ex-1.stdout.log") || errf != filepath.Join(root, "sb-1", "ex-1.stderr.log") {
		t.Errorf("outputPaths = %q, %q, %v", out, errf, err)
	}
	out, _, err = outputPaths(root, "runs/{exec_id}-of-{sandbox_id}", "sb-1", "ex-1")
	if err != nil || out != filepath.Join(root, "runs", "ex-1-of-sb-1.stdout.log") {
		t.Errorf("outputPaths with another template = %q, %v", out, err)
	}
	for _, tt := range []struct{ sandbox, exec string }{{"..", "ex-1"}, {"sb-1", "../../x"}, {"a/b", "ex-1"}, {"sb-1", ""}, {"sb-1", "."}} {
		if _, _, err := outputPaths(root, "{sandbox_id}/{exec_id}", tt.sandbox, tt.exec); !errors.Is(err, ids.ErrInvalid) {
			t.Errorf("outputPaths(%q, %q) = %v, want an invalid ID", tt.sandbox, tt.exec, err)
		}
	}
	for _, tmpl := range []string{"../{sandbox_id}/{exec_id}", "{sandbox_id}/../../{exec_id}", "/../../{sandbox_id}{exec_id}/../.."} {
		if _, _, err := outputPaths(root, tmpl, "sb-1", "ex-1"); !errors.Is(err, errOutsideRoot) {
			t.Errorf("outputPaths with template %q = %v, want a path outside the root refused", tmpl, err)
		}
	}
}
