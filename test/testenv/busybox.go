package testenv

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/client"
)

// BusyboxRepo is the repository of the test image; its tag is a content hash.
const BusyboxRepo = "airlock-test/busybox"

// hostBusybox is the static busybox the test image is made of (Debian
// package busybox-static, installed by ./scripts/engine.sh).
const hostBusybox = "/bin/busybox"

// busyboxBuildTimeout bounds a build made for a test.
const busyboxBuildTimeout = 3 * time.Minute

// busyboxDockerfile copies the root file system assembled in the build context;
// the applet symlinks are made in the context, which spares a RUN step (and the
// container it would start).
const busyboxDockerfile = `FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
CMD ["sh"]
`

const (
	busyboxPasswd = "root:x:0:0:root:/root:/bin/sh\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
	busyboxGroup = "root:x:0:\n" +
		"nobody:x:65534:\n"
)

// requiredApplets must be in the host busybox for the image to be useful to
// airlock's tests (trap is a shell builtin, so comes with sh).
var requiredApplets = []string{"sh", "httpd", "nc", "wget", "sleep", "cat", "env", "id", "kill", "false"}

// contextModTime is the fixed modification time of every entry of the build
// context, so that the context, and with it the tag, depends on content only.
var contextModTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

var busybox struct {
	once sync.Once
	ref  string
	err  error
}

// BusyboxImage returns the reference of a FROM-scratch image holding the
// host's static /bin/busybox with its applets linked in /bin, /etc/passwd and
// /etc/group with root and nobody (65534), and a /tmp with mode 1777. The image
// is built once per test process and reused across processes while the
// busybox binary and the recipe stay the same (its tag is a content hash).
func BusyboxImage(t testing.TB) string {
	t.Helper()
	cli := Client(t) // outside the Once: it may skip or fail this test only
	busybox.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), busyboxBuildTimeout)
		defer cancel()
		start := time.Now()
		var built bool
		busybox.ref, built, busybox.err = buildBusyboxImage(ctx, cli)
		if busybox.err == nil {
			how := "reused"
			if built {
				how = "built"
			}
			t.Logf("testenv: %s image %s in %v", how, busybox.ref, time.Since(start).Round(time.Millisecond))
		}
	})
	if busybox.err != nil {
		t.Fatalf("%v", busybox.err)
	}
	return busybox.ref
}

// BuildBusyboxImage returns the reference of the busybox test image described
// at BusyboxImage, building it through the Engine API unless an image with
// that reference exists. Concurrent calls, even from several processes, are
// safe: at worst they build the same image twice.
func BuildBusyboxImage(ctx context.Context, cli client.APIClient) (string, error) {
	ref, _, err := buildBusyboxImage(ctx, cli)
	return ref, err
}

func buildBusyboxImage(ctx context.Context, cli client.APIClient) (ref string, built bool, err error) {
	buildCtx, err := busyboxContext(hostBusybox)
	if err != nil {
		return "", false, err
	}
	sum := sha256.Sum256(buildCtx)
	ref = BusyboxRepo + ":" + hex.EncodeToString(sum[:])[:12]

	if _, err := cli.ImageInspect(ctx, ref); err == nil {
		return ref, false, nil
	} else if !cerrdefs.IsNotFound(err) {
		return "", false, fmt.Errorf("cannot inspect image %s: %w", ref, err)
	}

	resp, err := cli.ImageBuild(ctx, bytes.NewReader(buildCtx), build.ImageBuildOptions{
		Tags:        []string{ref},
		Dockerfile:  "Dockerfile",
		Remove:      true,
		ForceRemove: true,
		// The classic builder takes a plain tar context over the API; BuildKit
		// would need a session. Engine 20.10 may default to either.
		Version: build.BuilderV1,
	})
	if err != nil {
		return "", false, fmt.Errorf("cannot build image %s: %w", ref, err)
	}
	defer resp.Body.Close()
	if err := readBuildOutput(resp.Body); err != nil {
		return "", false, fmt.Errorf("cannot build image %s: %w", ref, err)
	}
	if _, err := cli.ImageInspect(ctx, ref); err != nil {
		return "", false, fmt.Errorf("cannot find image %s after building it: %w", ref, err)
	}
	return ref, true, nil
}

// buildMessage is one JSON message of the classic builder's output stream.
type buildMessage struct {
	Stream      string `json:"stream"`
	Error       string `json:"error"`
	ErrorDetail *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
}

// readBuildOutput reads the build output stream to its end and returns the
// error it reports, if any, with the last lines of output for context.
func readBuildOutput(r io.Reader) error {
	dec := json.NewDecoder(r)
	var tail []string
	for {
		var m buildMessage
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("cannot read build output: %w", err)
		}
		if s := strings.TrimSpace(m.Stream); s != "" {
			tail = append(tail, s)
			if len(tail) > 10 {
				tail = tail[1:]
			}
		}
		msg := m.Error
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			msg = m.ErrorDetail.Message
		}
		if msg != "" {
			if len(tail) > 0 {
				return fmt.Errorf("%s (after: %s)", msg, strings.Join(tail, " | "))
			}
			return errors.New(msg)
		}
	}
}

// busyboxContext returns the build context: the Dockerfile and rootfs/, the
// image's file system, as a tar with fixed metadata so that equal inputs give
// equal bytes.
func busyboxContext(busyboxPath string) ([]byte, error) {
	bin, err := os.ReadFile(busyboxPath)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s (install busybox-static, e.g. with ./scripts/engine.sh): %w", busyboxPath, err)
	}
	if err := checkStatic(busyboxPath, bin); err != nil {
		return nil, err
	}
	applets, err := busyboxApplets(busyboxPath)
	if err != nil {
		return nil, err
	}

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(h *tar.Header, body []byte) {
		h.ModTime = contextModTime
		h.Format = tar.FormatPAX
		h.Size = int64(len(body))
		if err == nil {
			err = tw.WriteHeader(h)
		}
		if err == nil && len(body) > 0 {
			_, err = tw.Write(body)
		}
	}
	dir := func(name string, mode int64) {
		add(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode}, nil)
	}
	file := func(name string, mode int64, body []byte) {
		add(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode}, body)
	}

	file("Dockerfile", 0o644, []byte(busyboxDockerfile))
	dir("rootfs", 0o755)
	dir("rootfs/bin", 0o755)
	file("rootfs/bin/busybox", 0o755, bin)
	for _, a := range applets {
		add(&tar.Header{Typeflag: tar.TypeSymlink, Name: "rootfs/bin/" + a, Linkname: "/bin/busybox", Mode: 0o777}, nil)
	}
	dir("rootfs/etc", 0o755)
	file("rootfs/etc/passwd", 0o644, []byte(busyboxPasswd))
	file("rootfs/etc/group", 0o644, []byte(busyboxGroup))
	dir("rootfs/root", 0o700)
	dir("rootfs/tmp", 0o1777)
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("cannot write build context: %w", err)
	}
	return buf.Bytes(), nil
}

// checkStatic fails unless bin is a statically linked ELF executable: a
// FROM-scratch image has no dynamic loader nor libraries.
func checkStatic(path string, bin []byte) error {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("cannot use %s as an ELF executable: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("cannot use %s: it is dynamically linked, a FROM-scratch image needs a static one (install busybox-static)", path)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		return fmt.Errorf("cannot use %s: it needs shared libraries %s, a FROM-scratch image needs a static one (install busybox-static)",
			path, strings.Join(libs, ", "))
	}
	return nil
}

// busyboxApplets returns the sorted applet names the busybox binary provides,
// what "busybox --install -s /bin" would link.
func busyboxApplets(path string) ([]string, error) {
	out, err := exec.Command(path, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("cannot list the applets of %s: %w", path, err)
	}
	var applets []string
	for _, a := range strings.Fields(string(out)) {
		if a != "busybox" && !strings.Contains(a, "/") {
			applets = append(applets, a)
		}
	}
	slices.Sort(applets)
	applets = slices.Compact(applets)
	for _, a := range requiredApplets {
		if _, found := slices.BinarySearch(applets, a); !found {
			return nil, fmt.Errorf("cannot use %s: it lacks the %s applet", path, a)
		}
	}
	return applets, nil
}

// BusyboxClient is an Engine client (NewClient) and the busybox test image
// built on that Engine (BuildBusyboxImage): what every benchmark starts with.
// The caller closes the client.
func BusyboxClient(ctx context.Context) (*client.Client, string, error) {
	cli, err := NewClient(ctx)
	if err != nil {
		return nil, "", err
	}
	image, err := BuildBusyboxImage(ctx, cli)
	if err != nil {
		cli.Close()
		return nil, "", err
	}
	return cli, image, nil
}
