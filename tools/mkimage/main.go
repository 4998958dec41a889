// Command mkimage writes the airlock image archive `make image` builds: FROM
// scratch plus a static Linux airlock binary at /airlock, its entrypoint, as an
// archive that docker load and ctr images import both accept, without a
// Docker Engine.
//
//	mkimage -binary bin/airlock-linux -build-id 5ad6729 -arch amd64 -o bin/airlock-image.tar
//
// -build-id names the image imagetar.ImageRef(id), "localhost/airlock:<id>",
// the name a binary of that build looks for; -tag names it otherwise.
package main

import (
	"bytes"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"

	"github.com/airlock-dev/airlock/internal/imagetar"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

// elfMachines maps a Go architecture to its ELF machine.
var elfMachines = map[string]elf.Machine{
	"amd64":   elf.EM_X86_64,
	"arm64":   elf.EM_AARCH64,
	"386":     elf.EM_386,
	"arm":     elf.EM_ARM,
	"ppc64le": elf.EM_PPC64,
	"riscv64": elf.EM_RISCV,
	"s390x":   elf.EM_S390,
}

func run(args []string, stdout io.Writer) error {
	fl := flag.NewFlagSet("mkimage", flag.ContinueOnError)
	binary := fl.String("binary", "", "the static linux airlock binary to put at /airlock")
	tag := fl.String("tag", "", "the image reference, with a tag (or give -build-id)")
	buildID := fl.String("build-id", "", "the build ID of the binary: names the image localhost/airlock:<id>")
	arch := fl.String("arch", runtime.GOARCH, "the binary's architecture (Go's name)")
	out := fl.String("o", "", "the archive to write")
	if err := fl.Parse(args); err != nil {
		return err
	}
	switch {
	case fl.NArg() > 0:
		return fmt.Errorf("cannot use arguments %q: mkimage takes flags only", fl.Args())
	case *binary == "" || *out == "":
		return errors.New("cannot write an image: -binary and -o are required")
	case (*tag == "") == (*buildID == ""):
		return errors.New("cannot name the image: give one of -tag and -build-id")
	}
	ref := *tag
	if ref == "" {
		ref = imagetar.ImageRef(*buildID)
	}

	data, err := os.ReadFile(*binary)
	if err != nil {
		return fmt.Errorf("cannot read the binary: %w", err)
	}
	if err := checkBinary(*binary, data, *arch); err != nil {
		return err
	}
	img := imagetar.Image{
		Ref: ref, OS: "linux", Architecture: *arch, Entrypoint: []string{"/airlock"},
		Files: []imagetar.File{{Path: "/airlock", Mode: 0o755, Data: data}},
	}

	// Write next to the archive, then rename: an interrupted run leaves no
	// half-written archive under its name.
	tmp, err := os.CreateTemp(filepath.Dir(*out), filepath.Base(*out)+".*.tmp")
	if err != nil {
		return fmt.Errorf("cannot write the archive: %w", err)
	}
	defer os.Remove(tmp.Name())
	w, err := imagetar.Write(tmp, img)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", *out, err)
	}
	if err := os.Rename(tmp.Name(), *out); err != nil {
		return fmt.Errorf("cannot write %s: %w", *out, err)
	}
	fmt.Fprintf(stdout, "%s: %s linux/%s, ID %s, %.1f MB\n", *out, w.Ref, *arch, w.ID, float64(w.Size)/1e6)
	return nil
}

// checkBinary fails unless data is a statically linked Linux ELF executable
// for arch: a FROM-scratch image has no dynamic loader nor libraries.
func checkBinary(path string, data []byte, arch string) error {
	want, ok := elfMachines[arch]
	if !ok {
		return fmt.Errorf("cannot build an image for architecture %q", arch)
	}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("cannot use %s as a Linux executable: %w", path, err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("cannot use %s: it is not an executable (%v)", path, f.Type)
	}
	if f.Machine != want {
		return fmt.Errorf("cannot use %s for linux/%s: it is a %v binary", path, arch, f.Machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("cannot use %s: it is dynamically linked, a FROM-scratch image needs a static one (CGO_ENABLED=0)", path)
		}
	}
	return nil
}
