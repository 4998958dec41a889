package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/airlock-dev/airlock/internal/fsentry"
)

// The files API beside read and write: list, stat, remove, mkdir, rename and
// watch (docs/api.md, "Files").

// Error reasons of the files operations, beside those of read and write.
const (
	ReasonAlreadyExists    = "already_exists"    // 409: mkdir or rename onto a path that exists
	ReasonNotEmpty         = "not_empty"         // 409: a directory removed without recursive, or replaced, holds entries
	ReasonPermissionDenied = "permission_denied" // 403: the sandbox's user may not do it
)

// FileEntry is one file of a sandbox as lstat sees it (a symbolic link is
// described, not followed).
type FileEntry struct {
	Name   string    // base name
	Path   string    // absolute path in the sandbox
	Type   string    // FileTypeFile, FileTypeDir, FileTypeSymlink, "fifo", "socket", "char_device", "block_device"
	Size   int64     // bytes
	Mode   uint32    // permission bits with set-user-ID, set-group-ID and sticky (0 to 0o7777)
	MTime  time.Time // last modification
	UID    uint32
	GID    uint32
	Target string // a symbolic link's target, as written
}

// The types of a FileEntry.
const (
	FileTypeFile    = "file"
	FileTypeDir     = "dir"
	FileTypeSymlink = "symlink"
)

// MarshalJSON writes the entry as the API does (a name, path or link target
// that is not UTF-8 has its bytes in the field with the suffix _base64:
// docs/api.md): the daemon's own form of it.
func (e FileEntry) MarshalJSON() ([]byte, error) { return json.Marshal(fsentry.Entry(e).Wire()) }

// UnmarshalJSON reads the API's entry.
func (e *FileEntry) UnmarshalJSON(b []byte) error {
	var x fsentry.Entry
	if err := json.Unmarshal(b, &x); err != nil {
		return err
	}
	*e = FileEntry(x)
	return nil
}

// FileEvent is one change under a watched directory.
type FileEvent struct {
	Type string // one of the FileEvent constants
	Path string // absolute; "" for ready, overflow and error
	Dir  bool   // the path is a directory
	// Reason says, for an overflow, which bound was reached and what was
	// lost; for an error, why the watch ended.
	Reason  string
	Dropped int // for an overflow of the events per second: how many were left out
	Watched int // for ready: how many directories are watched
}

// The types of a FileEvent.
const (
	FileEventReady    = "ready"    // the watches are set: what changes from now on is reported
	FileEventCreated  = "created"  // made, or moved in
	FileEventModified = "modified" // content or attributes changed
	FileEventRemoved  = "removed"  // removed, or moved out
	FileEventOverflow = "overflow" // events were lost: a bound was reached
	FileEventError    = "error"    // the watch failed and ends
)

type fileEventJSON struct {
	Type    string `json:"type"`
	Path    string `json:"path,omitempty"`
	PathB64 string `json:"path_base64,omitempty"`
	Dir     bool   `json:"dir,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Dropped int    `json:"dropped,omitempty"`
	Watched int    `json:"watched,omitempty"`
}

// MarshalJSON writes the event as the API does.
func (ev FileEvent) MarshalJSON() ([]byte, error) {
	w := fileEventJSON{Type: ev.Type, Dir: ev.Dir, Reason: ev.Reason, Dropped: ev.Dropped, Watched: ev.Watched}
	w.Path, w.PathB64 = fsentry.Encode(ev.Path)
	return json.Marshal(w)
}

// UnmarshalJSON reads the API's event.
func (ev *FileEvent) UnmarshalJSON(b []byte) error {
	var w fileEventJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	p, err := fsentry.Decode("path", w.Path, w.PathB64)
	if err != nil {
		return err
	}
	*ev = FileEvent{Type: w.Type, Path: p, Dir: w.Dir, Reason: w.Reason, Dropped: w.Dropped, Watched: w.Watched}
	return nil
}

// FileList is a listing: the entries of Path (and of its subdirectories, to
// the depth asked for), Truncated when there were more than the limit.
type FileList struct {
	Path      string
	Entries   []FileEntry
	Truncated bool
}

type fileListJSON struct {
	Path      string      `json:"path"`
	PathB64   string      `json:"path_base64,omitempty"`
	Entries   []FileEntry `json:"entries"`
	Truncated bool        `json:"truncated"`
}

// MarshalJSON writes the listing as the API does.
func (l FileList) MarshalJSON() ([]byte, error) {
	w := fileListJSON{Entries: l.Entries, Truncated: l.Truncated}
	if w.Entries == nil {
		w.Entries = []FileEntry{}
	}
	w.Path, w.PathB64 = fsentry.Encode(l.Path)
	return json.Marshal(w)
}

// UnmarshalJSON reads the API's listing.
func (l *FileList) UnmarshalJSON(b []byte) error {
	var w fileListJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	p, err := fsentry.Decode("path", w.Path, w.PathB64)
	if err != nil {
		return err
	}
	*l = FileList{Path: p, Entries: w.Entries, Truncated: w.Truncated}
	return nil
}

// ListFiles lists the directory path of a ready sandbox: depth 1 (or 0) its
// entries, more the entries of its subdirectories to that depth; at most
// limit (0: the daemon's default, 10000).
func (c *Client) ListFiles(ctx context.Context, id, path string, depth, limit int) (*FileList, error) {
	q := url.Values{"path": {path}}
	if depth != 0 {
		q.Set("depth", strconv.Itoa(depth))
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var l FileList
	if err := c.filesJSON(ctx, http.MethodGet, id, "/files/list", q, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// StatFile describes path in a ready sandbox (a link is not followed).
func (c *Client) StatFile(ctx context.Context, id, path string) (*FileEntry, error) {
	var e FileEntry
	if err := c.filesJSON(ctx, http.MethodGet, id, "/files/stat", url.Values{"path": {path}}, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// RemoveFile removes path in a ready sandbox: a file, a link or an empty
// directory; with recursive a directory and what it holds.
func (c *Client) RemoveFile(ctx context.Context, id, path string, recursive bool) error {
	q := url.Values{"path": {path}}
	if recursive {
		q.Set("recursive", "true")
	}
	return c.filesJSON(ctx, http.MethodDelete, id, "/files", q, nil)
}

// RemoveFilesRequest is the body of POST …/files/remove: many paths removed
// in one request, in order, stopping at the first failure.
type RemoveFilesRequest struct {
	Paths     []string `json:"paths"`                // absolute paths in the sandbox (at most 10000)
	Recursive bool     `json:"recursive,omitempty"`  // a directory and all it holds
	MissingOK bool     `json:"missing_ok,omitempty"` // a path that is not there is no error
}

// RemoveFiles removes many paths of a ready sandbox in one request (one exec
// in it): each as RemoveFile does.
func (c *Client) RemoveFiles(ctx context.Context, id string, req *RemoveFilesRequest) error {
	return c.do(ctx, http.MethodPost, "/v1/sandboxes/"+url.PathEscape(id)+"/files/remove", req, nil)
}

// MakeDir makes the directory path in a ready sandbox; with parents the
// missing ones on the way too, and an existing directory is no error.
func (c *Client) MakeDir(ctx context.Context, id, path string, parents bool) error {
	q := url.Values{"path": {path}}
	if parents {
		q.Set("parents", "true")
	}
	return c.filesJSON(ctx, http.MethodPost, id, "/files/mkdir", q, nil)
}

// RenameFile renames from as to in a ready sandbox (within one of its
// filesystems); without overwrite an existing to is ReasonAlreadyExists.
func (c *Client) RenameFile(ctx context.Context, id, from, to string, overwrite bool) error {
	q := url.Values{"from": {from}, "to": {to}}
	if overwrite {
		q.Set("overwrite", "true")
	}
	return c.filesJSON(ctx, http.MethodPost, id, "/files/rename", q, nil)
}

func (c *Client) filesJSON(ctx context.Context, method, id, route string, q url.Values, out any) error {
	resp, err := c.sendRaw(ctx, method, "/v1/sandboxes/"+url.PathEscape(id)+route+"?"+q.Encode(), nil, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("cannot read the daemon's answer: %w", err)
	}
	return nil
}

// WatchOptions bound a watch: 0 for the daemon's defaults (1024 directories,
// 1000 events a second).
type WatchOptions struct {
	Recursive bool
	MaxDirs   int
	Rate      int
}

// FileWatch is a watch of a sandbox's directory: Next returns its events,
// the first a FileEventReady; Close ends it (and its process in the sandbox).
type FileWatch struct {
	body io.ReadCloser
	sc   *bufio.Scanner
}

// WatchFiles watches the directory path of a ready sandbox (GET
// …/files/watch, server-sent events).
func (c *Client) WatchFiles(ctx context.Context, id, path string, o WatchOptions) (*FileWatch, error) {
	q := url.Values{"path": {path}}
	if o.Recursive {
		q.Set("recursive", "true")
	}
	if o.MaxDirs != 0 {
		q.Set("max_dirs", strconv.Itoa(o.MaxDirs))
	}
	if o.Rate != 0 {
		q.Set("rate", strconv.Itoa(o.Rate))
	}
	resp, err := c.sendRaw(ctx, http.MethodGet, "/v1/sandboxes/"+url.PathEscape(id)+"/files/watch?"+q.Encode(), nil, http.Header{"Accept": {"text/event-stream"}})
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	return &FileWatch{body: resp.Body, sc: sc}, nil
}

// Next returns the next event; io.EOF once the watch ended.
func (w *FileWatch) Next() (FileEvent, error) {
	for w.sc.Scan() {
		line := w.sc.Bytes()
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok {
			continue // a comment (keep-alive), a blank line
		}
		var ev FileEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			return ev, fmt.Errorf("cannot read the watch's event %.200q: %w", data, err)
		}
		return ev, nil
	}
	if err := w.sc.Err(); err != nil {
		return FileEvent{}, err
	}
	return FileEvent{}, io.EOF
}

// Close ends the watch.
func (w *FileWatch) Close() error { return w.body.Close() }
