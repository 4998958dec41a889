package control

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"

	"github.com/airlock-dev/airlock/userconfig"
)

// A client on another machine sends a [sandbox.build] context before the
// prepare that builds from it (PUT /v1/build-contexts/{sum}): the daemon keeps
// the tar in a private directory until that prepare ends.

var sumPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// buildContexts are the build contexts clients sent, kept in dir ("": a
// private directory under the system temp dir), each at most max bytes.
type buildContexts struct {
	dir string
	max int64
}

// PutBuildContext keeps the tar stream r as the build context with hash sum
// (buildContexts.put).
func (s *Service) PutBuildContext(sum string, r io.Reader) error {
	return s.buildContexts.put(sum, r)
}

// path is where the context with hash sum is kept.
func (b buildContexts) path(sum string) (string, error) {
	if !sumPattern.MatchString(sum) {
		return "", errorf(ErrInvalidRequest, "%q is not a build context's hash (64 hex digits)", sum)
	}
	dir := b.dir
	if dir == "" {
		dir = filepath.Join(os.TempDir(), fmt.Sprintf("airlock-build-contexts-%d", os.Getuid()))
	}
	return filepath.Join(dir, sum+".tar"), nil
}

// put keeps the tar stream r as the build context with hash sum, at most
// artifacts.output_max of it.
func (b buildContexts) put(sum string, r io.Reader) error {
	p, err := b.path(sum)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("cannot keep the build context: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(p), "upload-*")
	if err != nil {
		return fmt.Errorf("cannot keep the build context: %w", err)
	}
	defer os.Remove(f.Name())
	max := b.max
	body := &boundReader{r: r, left: max}
	_, err = io.Copy(f, body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case body.over:
		return errorf(ErrTooLarge, "cannot keep the build context: it is over the limit of %s (artifacts.output_max)", userconfig.FormatSize(max))
	case err != nil:
		return errorf(ErrInvalidRequest, "cannot read the build context: %v", err)
	}
	return os.Rename(f.Name(), p)
}

// take is the kept context with hash sum and a func that removes it.
func (b buildContexts) take(sum string) (string, func(), error) {
	p, err := b.path(sum)
	if err != nil {
		return "", nil, err
	}
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		return "", nil, errorf(ErrInvalidRequest, "no build context %s was sent (PUT /v1/build-contexts/%s first)", sum, sum)
	}
	return p, func() { os.Remove(p) }, nil
}
