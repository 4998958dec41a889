package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
)

// Files in and out of a sandbox: GET and PUT /v1/sandboxes/{id}/files?path=…

// Error reasons of the files API.
const (
	ReasonPathNotFound = "path_not_found"  // 404: no such path in the sandbox
	ReasonNotRegular   = "not_a_file"      // 406: one file asked for, and the path is a directory, a link, …
	ReasonTooLarge     = "too_large"       // 413: over the daemon's artifacts.output_max
	ReasonNotDirectory = "not_a_directory" // 409: a write into (or below) a path that is a file in the sandbox
	ReasonIsDirectory  = "is_a_directory"  // 409: a file written over a folder of the sandbox
)

// Media types of the files API.
const (
	MediaTar   = "application/x-tar"
	MediaBytes = "application/octet-stream"
)

// ReadFile returns the bytes of the regular file path (absolute) in a ready or
// stopped sandbox. A directory, a symbolic link or another kind of file is
// ReasonNotRegular (use ReadArchive); a missing path ReasonPathNotFound; a
// file over the daemon's bound ReasonTooLarge.
func (c *Client) ReadFile(ctx context.Context, id, path string) (io.ReadCloser, error) {
	return c.readFiles(ctx, id, path, MediaBytes)
}

// ReadArchive returns a tar stream of path (absolute) in a ready or stopped
// sandbox, as the Docker Engine's archive API gives it: entries named from
// path's base name, a link at path archived as a link. The daemon ends an
// archive that passes its bound by breaking the connection: then a Read
// fails, never a clean end.
func (c *Client) ReadArchive(ctx context.Context, id, path string) (io.ReadCloser, error) {
	return c.readFiles(ctx, id, path, MediaTar)
}

func (c *Client) readFiles(ctx context.Context, id, path, accept string) (io.ReadCloser, error) {
	resp, err := c.filesRequest(ctx, http.MethodGet, id, url.Values{"path": {path}}, nil, http.Header{"Accept": {accept}})
	if err != nil {
		return nil, err
	}
	return &filesBody{body: resp.Body, path: path}, nil
}

// filesBody is a files response: an early end says what it likely was.
type filesBody struct {
	body io.ReadCloser
	path string
}

func (b *filesBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = fmt.Errorf("cannot read %s from the sandbox: the transfer broke off (the daemon cuts an archive over its artifacts.output_max): %w", b.path, err)
	}
	return n, err
}

func (b *filesBody) Close() error { return b.body.Close() }

// WriteFile writes r as the regular file path (absolute) in a ready sandbox,
// with mode (permission bits; 0 for 0644), owned by the sandbox's user. Over
// the daemon's bound it is ReasonTooLarge.
func (c *Client) WriteFile(ctx context.Context, id, path string, r io.Reader, mode os.FileMode) error {
	q := url.Values{"path": {path}}
	if mode != 0 {
		q.Set("mode", fileModeOctal(mode))
	}
	return c.writeFiles(ctx, id, q, r, MediaBytes)
}

// WriteArchive extracts the tar stream r into the folder dir (absolute; made
// when missing) of a ready sandbox, every entry owned by the sandbox's user.
// Names are relative to dir: one from /, with a .. part, or below a symbolic
// link of the same archive is refused, as are devices and FIFOs.
func (c *Client) WriteArchive(ctx context.Context, id, dir string, r io.Reader) error {
	return c.writeFiles(ctx, id, url.Values{"path": {dir}}, r, MediaTar)
}

func (c *Client) writeFiles(ctx context.Context, id string, q url.Values, r io.Reader, contentType string) error {
	resp, err := c.filesRequest(ctx, http.MethodPut, id, q, r, http.Header{"Content-Type": {contentType}})
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// fileModeOctal is mode's permission bits, set-user-ID, set-group-ID and
// sticky as the octal number chmod takes.
func fileModeOctal(mode os.FileMode) string {
	m := uint64(mode.Perm())
	if mode&os.ModeSetuid != 0 {
		m |= 0o4000
	}
	if mode&os.ModeSetgid != 0 {
		m |= 0o2000
	}
	if mode&os.ModeSticky != 0 {
		m |= 0o1000
	}
	return "0" + strconv.FormatUint(m, 8)
}

func (c *Client) filesRequest(ctx context.Context, method, id string, q url.Values, body io.Reader, h http.Header) (*http.Response, error) {
	return c.sendRaw(ctx, method, "/v1/sandboxes/"+url.PathEscape(id)+"/files?"+q.Encode(), body, h)
}
