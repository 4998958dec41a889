package execs

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/internal/ids"
	"github.com/airlock-dev/airlock/userconfig"
)

// outputPaths returns the output files of API exec execID of sandbox sandboxID
// (design.md §2): root (artifacts.exec_output_root) joined with template
// (artifacts.exec_output_template, its {sandbox_id} and {exec_id} replaced),
// plus ".stdout.log" and ".stderr.log". Both IDs must be valid airlock IDs (no
// "/", no ".."), and the files must stay under root, whatever the template says.
func outputPaths(root, template, sandboxID, execID string) (stdout, stderr string, err error) {
	for _, id := range []string{sandboxID, execID} {
		if err := ids.Validate(id); err != nil {
			return "", "", err
		}
	}
	rel := strings.NewReplacer(userconfig.SandboxIDPlaceholder, sandboxID, userconfig.ExecIDPlaceholder, execID).Replace(template)
	base := filepath.Join(root, rel)
	if r, err := filepath.Rel(root, base); err != nil || r == "." || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", "", fmt.Errorf("cannot place the output of exec %s: %s is %w %s (artifacts.exec_output_template %q)", execID, base, errOutsideRoot, root, template)
	}
	return base + ".stdout.log", base + ".stderr.log", nil
}

// errOutsideRoot is an exec output path that would leave its root.
var errOutsideRoot = errors.New("outside the exec output root")
