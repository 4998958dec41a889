package kube

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/projectfs"
)

// Files in and out of a running sandbox for the daemon's files API, through
// `supervise tar` and `supervise untar` in the primary: the archives the
// Docker backend gets from the Engine's archive API. A stopped sandbox has no
// Pod (Stop deletes it), so nothing can be read from it.

// lockedBuffer is a buffer an exec's stderr is written to while it is read.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.TrimSpace(l.b.String())
}

// ReadArchive streams a tar archive of p in the running primary (entries named
// from p's base name, links not followed); it returns once the archive has
// begun, so a missing path is an error wrapping backend.ErrNoSuchPath.
func (rt *Runtime) ReadArchive(ctx context.Context, pod, p string) (io.ReadCloser, error) {
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	var errOut lockedBuffer
	container, supervisor := MainContainer, backend.SupervisorIn
	if rt.primaryEnded(ctx, pod) {
		// The primary ended (run --output): its project files are read
		// through the keeper, which shares them (BuildPod).
		container, supervisor = KeeperContainer, "/airlock"
	}
	go func() {
		code, err := rt.execIn(ctx, pod, container, []string{supervisor, "supervise", "tar", "--", p}, nil, pw, &errOut)
		switch {
		case err != nil:
			err = failed("cannot read %s in the sandbox: %v", p, err)
		case code != 0 && strings.Contains(errOut.String(), "no such file or directory"):
			err = fmt.Errorf("cannot read %s: %w", p, backend.ErrNoSuchPath)
		case code != 0:
			err = failed("cannot read %s in the sandbox: %s", p, errOut.String())
		}
		pw.CloseWithError(err)
	}()
	br := bufio.NewReader(pr)
	if _, err := br.Peek(1); err != nil {
		cancel()
		pr.Close()
		return nil, err
	}
	return &archiveReader{Reader: br, close: func() { cancel(); pr.Close() }}, nil
}

type archiveReader struct {
	io.Reader
	close func()
}

func (a *archiveReader) Close() error { a.close(); return nil }

// WriteArchive extracts a tar stream into dir of the running primary through
// `supervise untar`, run as the container's user: the entries are the sandbox
// user's (as root, the archive's owners count, so they are made root's, or
// the sandbox user's when the container runs as root for its daemons), no symbolic
// link in dir is followed, and missing folders on the way are made.
func (rt *Runtime) WriteArchive(ctx context.Context, pod, dir string, r io.Reader) error {
	cmd := []string{backend.SupervisorIn, "supervise", "untar"}
	if p, err := rt.pods().Get(ctx, pod, metav1.GetOptions{}); err == nil {
		// A main container that runs as root for its daemons: the entries,
		// and the folders made on the way, are the sandbox user's, which the
		// Pod records (PodUser).
		if u, ok := MetaValue(&p.ObjectMeta, backend.LabelUser); ok {
			if uid, gid, err := numericUser(u); err == nil && uid != nil {
				g := int64(0)
				if gid != nil {
					g = *gid
				}
				cmd = append(cmd, "--owner", fmt.Sprintf("%d:%d", *uid, g))
			}
		}
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(projectfs.OwnArchive(pw, r, nil, 0, 0)) }()
	var out lockedBuffer
	code, err := rt.stream(ctx, pod, MainContainer, append(cmd, dir), pr, &out, &out, false, nil)
	pr.CloseWithError(io.ErrClosedPipe)
	if err == nil && code != 0 {
		if kerr := backend.KindOfExtractError(dir, out.String()); kerr != nil {
			return kerr
		}
		err = fmt.Errorf("%s", out.String())
	}
	if err != nil {
		return failed("cannot write into %s in the sandbox: %v", dir, err)
	}
	return nil
}
