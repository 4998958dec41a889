// Package presets holds the built-in presets, TOML layers embedded in the binary.
package presets

import (
	"embed"
	"strings"
)

// FS holds the built-in presets as <name>.toml at its root.
//
//go:embed *.toml
var FS embed.FS

// Description returns the first comment line of a preset file: its one-line summary.
func Description(data []byte) string {
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") {
			return strings.TrimSpace(strings.TrimLeft(line, "#"))
		}
		if line != "" {
			break
		}
	}
	return ""
}
