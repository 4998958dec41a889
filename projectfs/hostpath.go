package projectfs

import (
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/manifest"
)

// Mode is how the project dir reaches an Engine: "bind" or "copy"
// (project = "auto" copies it to an Engine that cannot see this host's files).
func Mode(r *manifest.Resolved, remote bool) string {
	switch r.Sandbox.Project {
	case "bind", "copy":
		return r.Sandbox.Project
	}
	if remote {
		return "copy"
	}
	return "bind"
}

// ExpandHostPath makes a host path of the manifest absolute: ~ is home (the
// user's home directory when empty), a relative path is under projectDir.
func ExpandHostPath(p, projectDir, home string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home == "" {
			home, _ = os.UserHomeDir()
		}
		return filepath.Join(home, strings.TrimPrefix(p, "~"))
	}
	if !filepath.IsAbs(p) {
		return filepath.Join(projectDir, p)
	}
	return filepath.Clean(p)
}

// InHome replaces a leading ~ of a path in the sandbox with the sandbox user's
// home.
func InHome(p, home string) string {
	if p == "~" {
		return home
	}
	if strings.HasPrefix(p, "~/") {
		return path.Join(home, p[2:])
	}
	return p
}
