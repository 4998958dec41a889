package docker

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/backend"
)

// The supervisor injected into a sandbox is a static Linux airlock binary for the
// Engine's CPU architecture, whatever system the CLI and daemon run on (macOS
// with Docker Desktop, an arm64 Linux host, a remote Engine): the Engine's Info
// says which architecture (Architecture, OSType), and Runtime.FindSupervisor
// which binary (the CLI: AIRLOCK_SUPERVISOR_BINARY, else the one `make build`
// embedded, else its own executable when it is a static Linux binary for that
// architecture). The supervisor volume is keyed by the architecture and the
// binary's identity.

// Supervisor is an airlock binary to inject as a sandbox's supervisor.
type Supervisor struct {
	// Source names it in messages: a path, or "the embedded linux/arm64 supervisor".
	Source string
	// Key identifies its content; the supervisor volume's name derives from it.
	Key string
	// Size is its size in bytes; ModTime the time the volume's file gets.
	Size    int64
	ModTime time.Time
	// Open returns its bytes.
	Open func() (io.ReadCloser, error)
}

// GoArch names an Engine's architecture (Info.Architecture, uname's machine:
// x86_64, aarch64, …) as Go does (amd64, arm64, …).
func GoArch(machine string) string {
	switch m := strings.ToLower(machine); m {
	case "x86_64", "amd64", "x86-64":
		return "amd64"
	case "aarch64", "arm64", "armv8", "armv8l", "aarch64_be":
		return "arm64"
	case "i386", "i486", "i586", "i686", "x86":
		return "386"
	case "armv6l", "armv7l", "armhf", "arm":
		return "arm"
	default:
		return m
	}
}

// supervisor is the binary to inject on this Engine: FindSupervisor's for its
// architecture, else Binary (checked to be a Linux binary for it).
func (s *supervisors) supervisor(ctx context.Context) (*Supervisor, string, error) {
	arch, err := s.kind.arch(ctx)
	if err != nil {
		return nil, "", err
	}
	var sup *Supervisor
	if s.find != nil {
		sup, err = s.find(arch)
	} else {
		sup, err = SupervisorFile(s.file, arch, s.buildID, false)
	}
	if err != nil {
		var se *backend.Error
		if errors.As(err, &se) {
			return nil, "", err
		}
		return nil, "", failed("cannot inject the supervisor into a sandbox on the Engine%s (linux/%s): %v", s.kind.suffix(), arch, err)
	}
	return sup, arch, nil
}

// SupervisorFile is the binary at path as the supervisor for a linux/arch
// Engine: it must be an ELF binary for that architecture and, with static, have
// no dynamic loader (a cgo build would not run in an image without its libc).
// Its key is buildID, size and modification time.
func SupervisorFile(path, arch, buildID string, static bool) (*Supervisor, error) {
	if path == "" {
		return nil, errors.New("no airlock binary to inject")
	}
	if err := CheckLinuxBinary(path, arch, static); err != nil {
		return nil, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("cannot find the airlock binary to inject (%s): %w", path, err)
	}
	return &Supervisor{
		Source:  path,
		Key:     fmt.Sprintf("file|%s|%d|%d", buildID, st.Size(), st.ModTime().UnixNano()),
		Size:    st.Size(),
		ModTime: st.ModTime(),
		Open:    func() (io.ReadCloser, error) { return os.Open(path) },
	}, nil
}

// elfMachines are the ELF machines of the architectures airlock knows.
var elfMachines = map[string]elf.Machine{
	"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "386": elf.EM_386, "arm": elf.EM_ARM,
	"riscv64": elf.EM_RISCV, "ppc64le": elf.EM_PPC64, "s390x": elf.EM_S390,
}

// CheckLinuxBinary checks that path is a Linux executable for arch (an ELF file
// for its machine; for an architecture not in the table only ELF is checked)
// and, with static, that it is statically linked.
func CheckLinuxBinary(path, arch string, static bool) error {
	f, err := elf.Open(path)
	if err != nil {
		var fe *elf.FormatError
		if errors.As(err, &fe) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%s is not a Linux binary (the supervisor runs inside the sandbox, on linux/%s)", path, arch)
		}
		return fmt.Errorf("cannot read the airlock binary to inject (%s): %w", path, err)
	}
	defer f.Close()
	if f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX {
		return fmt.Errorf("%s is not a Linux binary (ELF OS ABI %v)", path, f.OSABI)
	}
	if want, ok := elfMachines[arch]; ok && f.Machine != want {
		return fmt.Errorf("%s is a binary for %s, not for the Engine's linux/%s", path, machineName(f.Machine), arch)
	}
	if static {
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				return fmt.Errorf("%s is dynamically linked (built with cgo), and the supervisor must be a static binary "+
					"that runs in any image: build airlock with CGO_ENABLED=0 (make build does)", path)
			}
		}
	}
	return nil
}

func machineName(m elf.Machine) string {
	for arch, em := range elfMachines {
		if em == m {
			return "linux/" + arch
		}
	}
	return m.String()
}

// SupervisorGzip is a supervisor held gzip-compressed in memory (the binaries
// `make build` embeds); source names it. Its key is a hash of the compressed
// bytes, its size the gzip trailer's.
func SupervisorGzip(source string, gz []byte) (*Supervisor, error) {
	if len(gz) < 18 || gz[0] != 0x1f || gz[1] != 0x8b {
		return nil, fmt.Errorf("%s is not gzip data", source)
	}
	h := sha256.Sum256(gz)
	return &Supervisor{
		Source:  source,
		Key:     "gzip|" + hex.EncodeToString(h[:]),
		Size:    int64(binary.LittleEndian.Uint32(gz[len(gz)-4:])),
		ModTime: time.Unix(0, 0).UTC(),
		Open: func() (io.ReadCloser, error) {
			return gzip.NewReader(bytes.NewReader(gz))
		},
	}, nil
}
