// Package fsentry is the JSON of a sandbox's file as the files API lists it
// (Entry) and of a change under a watched path (Event): the same bytes from
// `airlock supervise fs` in the sandbox, through the daemon, to its clients.
//
// A name is bytes on Linux; JSON strings are Unicode. A name, path or link
// target that is valid UTF-8 is its JSON string as it is (newlines and other
// control characters escaped as JSON escapes them). One that is not has its
// string with each invalid byte replaced by U+FFFD, for people, and beside it
// the same field with the suffix "_base64": the exact bytes, base64 (standard
// alphabet, padded). A reader that needs the name back takes the _base64 field
// when it is there.
package fsentry

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The types of an entry.
const (
	TypeFile        = "file"
	TypeDir         = "dir"
	TypeSymlink     = "symlink"
	TypeFIFO        = "fifo"
	TypeSocket      = "socket"
	TypeCharDevice  = "char_device"
	TypeBlockDevice = "block_device"
)

// Entry is one file of a sandbox, as lstat sees it (a symbolic link is not
// followed).
type Entry struct {
	Name   string    // base name
	Path   string    // absolute path in the sandbox
	Type   string    // one of the Type constants
	Size   int64     // bytes (of a regular file; what lstat says for others)
	Mode   uint32    // permission bits with set-user-ID, set-group-ID and sticky (0 to 0o7777)
	MTime  time.Time // last modification
	UID    uint32
	GID    uint32
	Target string // a symbolic link's target, as it is written
}

// EntryJSON is Entry's JSON.
type EntryJSON struct {
	Name         string `json:"name"`
	NameB64      string `json:"name_base64,omitempty"`
	Path         string `json:"path"`
	PathB64      string `json:"path_base64,omitempty"`
	Type         string `json:"type"`
	Size         int64  `json:"size"`
	Mode         string `json:"mode"`
	MTime        string `json:"mtime"`
	UID          uint32 `json:"uid"`
	GID          uint32 `json:"gid"`
	LinkTarget   string `json:"link_target,omitempty"`
	LinkTargetB6 string `json:"link_target_base64,omitempty"`
}

// Encode returns s as a JSON string's value and, when s is not valid UTF-8,
// its bytes in base64 (else "").
func Encode(s string) (text, b64 string) {
	if utf8.ValidString(s) {
		return s, ""
	}
	return strings.ToValidUTF8(s, "\uFFFD"), base64.StdEncoding.EncodeToString([]byte(s))
}

// Decode is the name Encode gave as text and b64.
func Decode(field, text, b64 string) (string, error) {
	if b64 == "" {
		return text, nil
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return "", fmt.Errorf("%s_base64 is not base64: %v", field, err)
	}
	return string(b), nil
}

// FormatMode is a mode as the API writes it: octal with a leading 0 ("0644").
func FormatMode(m uint32) string { return fmt.Sprintf("%04o", m) }

// MarshalJSON writes the entry's JSON.
func (e Entry) MarshalJSON() ([]byte, error) { return json.Marshal(e.Wire()) }

// Wire is the entry's JSON form.
func (e Entry) Wire() EntryJSON {
	w := EntryJSON{Type: e.Type, Size: e.Size, Mode: FormatMode(e.Mode), MTime: e.MTime.UTC().Format(time.RFC3339Nano), UID: e.UID, GID: e.GID}
	w.Name, w.NameB64 = Encode(e.Name)
	w.Path, w.PathB64 = Encode(e.Path)
	w.LinkTarget, w.LinkTargetB6 = Encode(e.Target)
	return w
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (e *Entry) UnmarshalJSON(b []byte) error {
	var w EntryJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	return e.FromWire(w)
}

// FromWire sets e from its JSON form.
func (e *Entry) FromWire(w EntryJSON) error {
	var err error
	out := Entry{Type: w.Type, Size: w.Size, UID: w.UID, GID: w.GID}
	if out.Name, err = Decode("name", w.Name, w.NameB64); err != nil {
		return err
	}
	if out.Path, err = Decode("path", w.Path, w.PathB64); err != nil {
		return err
	}
	if out.Target, err = Decode("link_target", w.LinkTarget, w.LinkTargetB6); err != nil {
		return err
	}
	if w.Mode != "" {
		m, err := strconv.ParseUint(w.Mode, 8, 32)
		if err != nil {
			return fmt.Errorf("mode %q is not octal", w.Mode)
		}
		out.Mode = uint32(m)
	}
	if w.MTime != "" {
		if out.MTime, err = time.Parse(time.RFC3339Nano, w.MTime); err != nil {
			return fmt.Errorf("mtime: %v", err)
		}
	}
	*e = out
	return nil
}

// ListJSON is a listing's JSON (client.FileList).
type ListJSON struct {
	Path      string      `json:"path"`
	PathB64   string      `json:"path_base64,omitempty"`
	Entries   []EntryJSON `json:"entries"`
	Truncated bool        `json:"truncated"`
}

// The types of a watch's events.
const (
	EventReady    = "ready"    // the watches are set: what changes from now on is reported
	EventCreated  = "created"  // a file or directory appeared (made, or moved in)
	EventModified = "modified" // a file's content or attributes changed
	EventRemoved  = "removed"  // a file or directory went away (removed, or moved out)
	EventOverflow = "overflow" // events were lost: a bound was reached, or the kernel's queue overflowed
	EventError    = "error"    // the watch failed and ends (Reason says why)
)

// Event is one change under a watched path.
type Event struct {
	Type string // one of the Event constants
	Path string // absolute; "" for ready and overflow
	Dir  bool   // the path is a directory
	// Reason says, for an overflow, which bound was reached and what was
	// lost; for ready, how many directories are watched.
	Reason string
	// Dropped is, for an overflow of the events per second, how many were
	// left out.
	Dropped int
	// Watched is, for ready, how many directories are watched.
	Watched int
}

// EventJSON is Event's JSON.
type EventJSON struct {
	Type    string `json:"type"`
	Path    string `json:"path,omitempty"`
	PathB64 string `json:"path_base64,omitempty"`
	Dir     bool   `json:"dir,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Dropped int    `json:"dropped,omitempty"`
	Watched int    `json:"watched,omitempty"`
}

// MarshalJSON writes the event's JSON.
func (ev Event) MarshalJSON() ([]byte, error) {
	w := EventJSON{Type: ev.Type, Dir: ev.Dir, Reason: ev.Reason, Dropped: ev.Dropped, Watched: ev.Watched}
	w.Path, w.PathB64 = Encode(ev.Path)
	return json.Marshal(w)
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (ev *Event) UnmarshalJSON(b []byte) error {
	var w EventJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	p, err := Decode("path", w.Path, w.PathB64)
	if err != nil {
		return err
	}
	*ev = Event{Type: w.Type, Path: p, Dir: w.Dir, Reason: w.Reason, Dropped: w.Dropped, Watched: w.Watched}
	return nil
}

// Error kinds `airlock supervise fs` reports (Failure.Kind).
const (
	KindNotFound     = "not_found"
	KindNotDirectory = "not_a_directory"
	KindIsDirectory  = "is_a_directory"
	KindExists       = "exists"
	KindNotEmpty     = "not_empty"
	KindPermission   = "permission"
	KindInvalid      = "invalid"
	KindOther        = "other"
)

// Failure is what `airlock supervise fs` prints for an operation that failed:
// {"error": {"kind": …, "message": …}}, with exit code 1.
type Failure struct {
	Error struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	} `json:"error"`
}
