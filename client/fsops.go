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

// FileEntry is one file of a sandbox as lstat sees it (Name, Path, Type,
// Size, Mode, MTime, UID, GID, Target of a link). Its JSON gives a name that
// is not UTF-8 in base64 beside it (package fsentry).
type FileEntry = fsentry.Entry

// FileEvent is one change under a watched directory.
type FileEvent = fsentry.Event

// The types of a FileEntry.
const (
	FileTypeFile    = fsentry.TypeFile
	FileTypeDir     = fsentry.TypeDir
	FileTypeSymlink = fsentry.TypeSymlink
)

// The types of a FileEvent.
const (
	FileEventReady    = fsentry.EventReady
	FileEventCreated  = fsentry.EventCreated
	FileEventModified = fsentry.EventModified
	FileEventRemoved  = fsentry.EventRemoved
	FileEventOverflow = fsentry.EventOverflow
)

// FileList is a listing: the entries of Path (and of its subdirectories, to
// the depth asked for), Truncated when there were more than the limit.
type FileList struct {
	Path      string      `json:"path"`
	Entries   []FileEntry `json:"entries"`
	Truncated bool        `json:"truncated"`
}

// MarshalJSON gives Path as an entry's path is given (fsentry).
func (l FileList) MarshalJSON() ([]byte, error) {
	w := fsentry.ListJSON{Entries: make([]fsentry.EntryJSON, len(l.Entries)), Truncated: l.Truncated}
	w.Path, w.PathB64 = fsentry.Encode(l.Path)
	for i, e := range l.Entries {
		w.Entries[i] = e.Wire()
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (l *FileList) UnmarshalJSON(b []byte) error {
	var w fsentry.ListJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	p, err := fsentry.Decode("path", w.Path, w.PathB64)
	if err != nil {
		return err
	}
	out := FileList{Path: p, Entries: make([]FileEntry, len(w.Entries)), Truncated: w.Truncated}
	for i, ew := range w.Entries {
		if err := out.Entries[i].FromWire(ew); err != nil {
			return err
		}
	}
	*l = out
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
