package control

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/supervisor"
	"github.com/airlock-dev/airlock/userconfig"
)

// Files in and out of a sandbox (GET and PUT /v1/sandboxes/{id}/files): a tar
// stream in the layout of the Engine's archive API, or one regular file,
// through the backend's ReadArchive and WriteArchive. What moves is bounded by
// Config.OutputMax (artifacts.output_max), as `run --output` is.

var (
	// ErrTooLarge: a file, archive or body over Config.OutputMax.
	ErrTooLarge = errors.New("too large")
	// ErrNotRegular: a path asked for as one file that is something else.
	ErrNotRegular = errors.New("not a regular file")
)

// outputMax is the bound of what the files API moves.
func (c Config) outputMax() int64 {
	if c.OutputMax > 0 {
		return c.OutputMax
	}
	return userconfig.DefaultOutputMax
}

// sandboxFiles moves files in and out of sandboxes. It sees of the daemon
// only its store, the backend of a sandbox and its idle clock.
type sandboxFiles struct {
	store *store.Store
	max   int64 // Config.outputMax
	rtOf  func(id string) backend.Backend
	touch func(id string) // marks sandbox id active
}

// newFiles returns the files API's mover for s.
func newFiles(s *Service) *sandboxFiles {
	return &sandboxFiles{store: s.store, max: s.cfg.outputMax(), rtOf: s.rtOf, touch: s.lives.touch}
}

// ReadFiles reads path p of sandbox id (sandboxFiles.read).
func (s *Service) ReadFiles(ctx context.Context, id, p string, asTar bool) (*Download, error) {
	return s.files.read(ctx, id, p, asTar)
}

// WriteFiles writes into sandbox id (sandboxFiles.write).
func (s *Service) WriteFiles(ctx context.Context, id string, u Upload) error {
	return s.files.write(ctx, id, u)
}

// filesPath checks a path of the files API: absolute, no NUL; cleaned.
func filesPath(p string) (string, error) {
	switch {
	case p == "":
		return "", errorf(ErrInvalidRequest, "path is required: the absolute path in the sandbox (?path=/work/out)")
	case strings.ContainsRune(p, 0):
		return "", errorf(ErrInvalidRequest, "path %q holds a NUL byte", p)
	case !strings.HasPrefix(p, "/"):
		return "", errorf(ErrInvalidRequest, "path %q is not absolute: give the path in the sandbox from /", p)
	}
	return path.Clean(p), nil
}

// target is the container of sandbox id for a files request, which its
// state must allow (one of states).
func (fs *sandboxFiles) target(id string, states ...string) (backend.Backend, string, error) {
	rec, err := fs.store.Get(id)
	if err != nil {
		return nil, "", err
	}
	ok := false
	for _, st := range states {
		ok = ok || rec.State == st
	}
	if !ok && rec.State == store.StatePaused {
		return nil, "", pausedError(rec, "write into") // reads take a paused one
	}
	if !ok || rec.ContainerID == "" {
		return nil, "", notIn(id, rec.State, strings.Join(states, " or "))
	}
	fs.touch(id)
	return fs.rtOf(id), rec.ContainerID, nil
}

// Download is what ReadFiles sends: one file's bytes (Size of them) or a tar
// stream (Tar, Size -1), which reads ErrTooLarge once it passed the bound.
type Download struct {
	Body io.Reader
	Size int64
	Tar  bool
	rc   io.Closer
}

// Close ends the backend's stream.
func (d *Download) Close() error { return d.rc.Close() }

// read reads path p of sandbox id, ready, stopped or failed (where the backend
// can read a stopped one): a tar stream with asTar, or when p is a regular
// file, its bytes. A file over the bound is ErrTooLarge before anything is
// sent; so is an archive whose first entry is such a file. A missing path
// wraps sandbox.ErrNoSuchPath.
func (fs *sandboxFiles) read(ctx context.Context, id, p string, asTar bool) (*Download, error) {
	p, err := filesPath(p)
	if err != nil {
		return nil, err
	}
	// Failed too: what a failed sandbox left is worth reading (and run
	// --output copies back what the main command made whatever the state).
	rt, cid, err := fs.target(id, store.StateReady, store.StateStopped, store.StateFailed, store.StatePaused)
	if err != nil {
		return nil, err
	}
	rc, err := rt.ReadArchive(ctx, cid, p)
	if err != nil {
		return nil, err
	}
	max := fs.max
	tooLarge := func(size int64) error {
		rc.Close()
		return errorf(ErrTooLarge, "cannot read %s: it holds %s, over the limit of %s (artifacts.output_max)", p, userconfig.FormatSize(size), userconfig.FormatSize(max))
	}
	if asTar {
		br := bufio.NewReaderSize(rc, 64<<10)
		if h := firstHeader(br); h != nil && isRegular(h) && h.Size > max {
			return nil, tooLarge(h.Size)
		}
		return &Download{Body: &cutReader{r: br, left: max, what: p, max: max}, Size: -1, Tar: true, rc: rc}, nil
	}
	tr := tar.NewReader(rc)
	h, err := tr.Next()
	if err != nil {
		rc.Close()
		return nil, fmt.Errorf("cannot read %s: the sandbox's archive of it: %w", p, err)
	}
	if !isRegular(h) {
		rc.Close()
		what := "a " + supervisor.TarEntryKind(h.Typeflag)
		if h.Typeflag == tar.TypeSymlink {
			what = fmt.Sprintf("a symbolic link to %s (never followed)", h.Linkname)
		}
		return nil, errorf(ErrNotRegular, "cannot read %s as one file: it is %s; ask for an archive of it (Accept: application/x-tar)", p, what)
	}
	if h.Size > max {
		return nil, tooLarge(h.Size)
	}
	return &Download{Body: io.LimitReader(tr, h.Size), Size: h.Size, rc: rc}, nil
}

func isRegular(h *tar.Header) bool {
	return h.Typeflag == tar.TypeReg || h.Typeflag == '\x00' // TypeRegA, deprecated
}

// firstHeader parses the first entry of the tar stream that br begins with,
// without consuming it; nil when it does not fit in br's buffer.
func firstHeader(br *bufio.Reader) *tar.Header {
	b, _ := br.Peek(br.Size())
	h, err := tar.NewReader(bytes.NewReader(b)).Next()
	if err != nil {
		return nil
	}
	return h
}

// cutReader reads at most left bytes, then fails with ErrTooLarge.
type cutReader struct {
	r    io.Reader
	left int64
	what string
	max  int64
}

func (c *cutReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		// One byte more tells a stream of exactly max bytes from a longer one.
		var one [1]byte
		n, err := io.ReadFull(c.r, one[:])
		if n == 0 {
			return 0, err
		}
		return 0, errorf(ErrTooLarge, "cannot send the archive of %s: it is over the limit of %s (artifacts.output_max)", c.what, userconfig.FormatSize(c.max))
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// Upload is a body for WriteFiles: a tar stream to extract into Path, or the
// bytes of the regular file Path (Size of them; -1 when not known), Mode its
// permission bits as chmod takes them (0o644).
type Upload struct {
	Path string
	Body io.Reader
	Size int64
	Tar  bool
	Mode uint32
}

// write writes into sandbox id, which must be ready, through the
// backend's WriteArchive: the entries are the sandbox user's. A body over the
// bound is ErrTooLarge: before anything is written when its size is known;
// otherwise once it passed the bound, when a part of an archive may already
// be extracted.
func (fs *sandboxFiles) write(ctx context.Context, id string, u Upload) error {
	p, err := filesPath(u.Path)
	if err != nil {
		return err
	}
	if !u.Tar && p == "/" {
		return errorf(ErrInvalidRequest, "path / is a directory: a file needs a name (?path=/work/file)")
	}
	if u.Mode&^0o7777 != 0 {
		return errorf(ErrInvalidRequest, "mode %o is not a file mode (0 to 7777, octal)", u.Mode)
	}
	// Pending too: a client writes its project and copies into a sandbox made
	// with ClientFiles before resuming it.
	rt, cid, err := fs.target(id, store.StateReady, store.StatePending)
	if err != nil {
		return err
	}
	max := fs.max
	tooLarge := func(what string) error {
		return errorf(ErrTooLarge, "cannot write %s: %s is over the limit of %s (artifacts.output_max)", p, what, userconfig.FormatSize(max))
	}
	if u.Size > max {
		return tooLarge(fmt.Sprintf("the body (%s)", userconfig.FormatSize(u.Size)))
	}
	body := &boundReader{r: u.Body, left: max}
	defer func() {
		fs.touch(id)
	}()
	if !u.Tar && u.Size < 0 {
		// A tar header needs the size: the body is kept in a file first.
		f, err := os.CreateTemp("", "airlock-upload-*")
		if err != nil {
			return fmt.Errorf("cannot keep the body of %s: %w", p, err)
		}
		defer os.Remove(f.Name())
		defer f.Close()
		n, err := io.Copy(f, body)
		if body.over {
			return tooLarge("the body")
		}
		if err != nil {
			return errorf(ErrInvalidRequest, "cannot read the body of %s: %v", p, err)
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("cannot keep the body of %s: %w", p, err)
		}
		u.Body, u.Size = f, n
	} else {
		u.Body = body
	}
	dir := p
	write := func(w io.Writer) error { return checkArchive(w, u.Body) }
	if !u.Tar {
		dir = path.Dir(p)
		write = func(w io.Writer) error { return fileArchive(w, path.Base(p), u) }
	}
	pr, pw := io.Pipe()
	bodyErr := make(chan error, 1) // the caller's: a bad archive, a short body
	go func() {
		err := write(pw)
		pw.CloseWithError(err)
		bodyErr <- err
	}()
	err = rt.WriteArchive(ctx, cid, dir, pr)
	pr.CloseWithError(io.ErrClosedPipe)
	berr := <-bodyErr // it ends at its next write, on the closed pipe
	switch {
	case body.over:
		return tooLarge("the body")
	case berr != nil && !errors.Is(berr, io.ErrClosedPipe):
		return berr
	}
	return err
}
