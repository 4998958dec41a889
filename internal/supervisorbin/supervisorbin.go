// Package supervisorbin holds the Linux supervisors `make build` embeds into the
// CLI: airlock itself built for linux/amd64 and linux/arm64 (CGO_ENABLED=0,
// static), gzip-compressed, so that a CLI on any system (macOS, an arm64 Linux
// host) can inject a supervisor of the Engine's architecture into a sandbox.
//
// The Makefile writes them under gen/ (not committed) and builds the CLI with
// the build tag embedsupervisors, which compiles embed.go; without the tag (a
// plain go build or go test) nothing is embedded and Gzipped returns nil.
package supervisorbin

// Tag is the build tag that embeds the supervisors.
const Tag = "embedsupervisors"

// Arches are the architectures make build embeds (Go's names).
var Arches = []string{"amd64", "arm64"}

// embedded maps an architecture to its gzip-compressed binary (embed.go).
var embedded map[string][]byte

// Gzipped returns the gzip-compressed static linux/arch airlock binary embedded
// in this build, or nil.
func Gzipped(arch string) []byte { return embedded[arch] }

// Embedded reports whether this build embeds the supervisors.
func Embedded() bool { return len(embedded) > 0 }
