package benchdoc

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/test/testenv"
)

// Options are what every benchmark command is told: the airlock binary, the
// file its figures are recorded in ("" for nowhere) and the command named in
// the record.
type Options struct {
	Airlock string
	Doc     string
	Command string
}

// Flags declares -airlock, -doc and -command (whose default is command);
// flag.Parse sets the Options.
func Flags(command string) *Options {
	o := &Options{}
	flag.StringVar(&o.Airlock, "airlock", "bin/airlock", "the airlock binary")
	flag.StringVar(&o.Doc, "doc", "docs/benchmarks.md", "where to record the figures (\"\" for nowhere)")
	flag.StringVar(&o.Command, "command", command, "the command named in the record")
	return o
}

// Exit ends the benchmark command name with err on stderr and exit status 1;
// with a nil err it does nothing.
func Exit(name string, err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// Busybox is the start most benchmarks share: a client of the Engine, the
// local busybox test image built in it, and a Project whose sandbox.toml is
// Manifest. Close stops the project's control daemon, removes its home and
// closes the client.
type Busybox struct {
	*Project
	Airlock  string         // the airlock binary, as an absolute path
	Engine   *client.Client // the Engine the tests use
	Image    string         // the busybox test image
	Manifest string         // the project's sandbox.toml
}

// PlainManifest is the manifest of the image alone.
func PlainManifest(image string) string { return fmt.Sprintf("[sandbox]\nimage = %q\n", image) }

// OpenBusybox makes a Busybox for the airlock binary, its project in a new
// temporary home named prefix*, with manifest(image) as its sandbox.toml.
func OpenBusybox(ctx context.Context, airlock, prefix string, manifest func(image string) string) (*Busybox, error) {
	airlock, _ = filepath.Abs(airlock)
	cli, image, err := testenv.BusyboxClient(ctx)
	if err != nil {
		return nil, err
	}
	b := &Busybox{Airlock: airlock, Engine: cli, Image: image, Manifest: manifest(image)}
	if b.Project, err = NewProject(prefix, map[string]string{"sandbox.toml": b.Manifest}); err != nil {
		cli.Close()
		return nil, err
	}
	return b, nil
}

// Close stops the project's control daemon, removes its home and closes the
// Engine's client.
func (b *Busybox) Close() {
	b.Project.Close(b.Airlock)
	b.Engine.Close()
}

// WarmUp runs `airlock run -- true` and `docker run --rm IMAGE true` once
// each, untimed: the control daemon, the supervisor volume and the image are
// ready before the first sample.
func (b *Busybox) WarmUp() error {
	if _, err := b.Time(b.Airlock, "run", "--", "true"); err != nil {
		return err
	}
	if _, err := b.Time("docker", "run", "--rm", b.Image, "true"); err != nil {
		return err
	}
	return nil
}

// Print prints rows on stdout, each measure padded to width.
func Print(width int, rows []Row) {
	for _, r := range rows {
		fmt.Printf("%-*s %s\n", width, r.Measure, r.Result)
	}
}
