package cli

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"runtime/debug"
	"strings"
)

// Version and BuildID identify this binary. The Makefile sets both at link time:
//
//	-ldflags "-X github.com/airlock-dev/airlock/cli.Version=… -X github.com/airlock-dev/airlock/cli.BuildID=…"
//
// Without -X (a plain go build or go install) BuildID comes from what the Go
// toolchain stamped into the binary (see buildIDFromInfo), so that a rebuilt
// binary replaces a running daemon of another build (docs/daemon.md).
var (
	Version = "0.1.0-dev"
	BuildID = ""
)

func init() {
	if BuildID == "" {
		info, _ := debug.ReadBuildInfo()
		BuildID = buildIDFromInfo(info, Version, ownExecutableID)
	}
}

// buildIDFromInfo is the build ID of a binary built without -X cli.BuildID:
//
//   - in a git checkout (go build, go install ./cmd/airlock): the short commit
//     of the VCS stamp, "5ad6729"; with uncommitted changes (vcs.modified)
//     "5ad6729-dirty.<exe>", where <exe> is 8 hex digits of the hash of the
//     binary's Go build ID, which the toolchain derives from everything that
//     went into it: two builds of the same dirty tree get the same ID, and any
//     change gives another, so the daemon is replaced exactly when the code
//     changed, though the commit did not;
//   - go install module@version: the module version, "v0.2.0" (a pseudo-version
//     names its commit);
//   - otherwise (no VCS stamp, as with go run or -buildvcs=false):
//     "<Version>+<exe>"; "unknown" only when even the executable cannot be read.
//
// exeID returns the 8 hex digits of the running executable ("" when unknown).
func buildIDFromInfo(info *debug.BuildInfo, version string, exeID func() string) string {
	withExe := func(id, sep string) string {
		if e := exeID(); e != "" {
			return id + sep + e
		}
		return id
	}
	if info == nil {
		return withExe("unknown", "+")
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		id := rev[:min(7, len(rev))]
		if settings["vcs.modified"] == "true" {
			return withExe(id+"-dirty", ".")
		}
		return id
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		if strings.HasSuffix(v, "+dirty") {
			return withExe(v, ".")
		}
		return v
	}
	if e := exeID(); e != "" {
		return version + "+" + e
	}
	return "unknown"
}

// ownExecutableID is executableID of the running binary, "" when it cannot be read.
func ownExecutableID() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	id, err := executableID(exe)
	if err != nil {
		return ""
	}
	return id
}

// executableID is 8 hex digits of the SHA-256 of a Go binary's build ID (the
// .note.go.buildid note of an ELF file; the marked string near the start of a
// Mach-O one), or of the whole file when it has none.
func executableID(path string) (string, error) {
	gid, err := goBuildID(path)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	if gid != "" {
		h.Write([]byte(gid))
	} else {
		f, err := os.Open(path)
		if err != nil {
			return "", err
		}
		defer f.Close()
		if _, err := io.Copy(h, f); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:8], nil
}

// goBuildID reads the Go toolchain's build ID of the binary at path ("" when
// it has none), as `go tool buildid` prints it.
func goBuildID(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if ef, err := elf.NewFile(f); err == nil {
		if sec := ef.Section(".note.go.buildid"); sec != nil {
			data, err := sec.Data()
			if err != nil {
				return "", err
			}
			// namesz, descsz, type, then the name "Go\0\0" and the ID.
			if len(data) >= 16 {
				namesz := ef.ByteOrder.Uint32(data[0:4])
				descsz := ef.ByteOrder.Uint32(data[4:8])
				start := 12 + (uint64(namesz)+3)&^3
				if typ := ef.ByteOrder.Uint32(data[8:12]); typ == 4 && start+uint64(descsz) <= uint64(len(data)) {
					return string(data[start : start+uint64(descsz)]), nil
				}
			}
		}
		return "", nil
	}
	// Elsewhere the linker writes `\xff Go build ID: "…"\n \xff` at the start
	// of the text, within the first 32 KiB of the file.
	head := make([]byte, 32<<10)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", err
	}
	head = head[:n]
	const prefix, suffix = "\xff Go build ID: \"", "\"\n \xff"
	i := bytes.Index(head, []byte(prefix))
	if i < 0 {
		return "", nil
	}
	rest := head[i+len(prefix):]
	j := bytes.Index(rest, []byte(suffix))
	if j < 0 {
		return "", nil
	}
	return string(rest[:j]), nil
}
