//go:build !nocompose

package compose

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestImageFromAnEmptyVariable: a service whose image a variable left
// without a name (${MSSQL_IMAGE}:latest with MSSQL_IMAGE unset) is an error
// on its line naming the variable, never ":latest" taken without a word.
func TestImageFromAnEmptyVariable(t *testing.T) {
	content := []byte("services:\n  mssql:\n    image: '${MSSQL_IMAGE}:latest'\n")
	_, errs := Load(context.Background(), Options{File: filepath.Join(t.TempDir(), "compose.yaml"), Content: content})
	if len(errs) != 1 {
		t.Fatalf("errors: %+v", errs)
	}
	e := errs[0]
	if e.Line != 3 || strings.Join(e.Path, ".") != "services.mssql.image" || !strings.Contains(e.Msg, `":latest" (written "${MSSQL_IMAGE}:latest") is not an image reference`) || !strings.Contains(e.Msg, "${MSSQL_IMAGE} is empty or not set") {
		t.Errorf("error: %+v", e)
	}
	_, errs = Load(context.Background(), Options{File: filepath.Join(t.TempDir(), "compose.yaml"), Content: content, Environ: []string{"MSSQL_IMAGE=mcr.microsoft.com/mssql/server"}})
	if len(errs) != 0 {
		t.Errorf("with the variable set: %+v", errs)
	}
}
