package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/internal/termsafe"
)

// maxListEntries is how many entries list_files returns at most.
const maxListEntries = 1000

// ReadInput is read_file's input.
type ReadInput struct {
	SandboxID string `json:"sandbox_id"`
	Path      string `json:"path" jsonschema:"an absolute path in the sandbox"`
	Encoding  string `json:"encoding,omitempty" jsonschema:"text (default: UTF-8, control characters escaped; base64 when the file is not text) or base64 (the bytes as they are)"`
}

// ReadOutput is read_file's result.
type ReadOutput struct {
	Path     string `json:"path"`
	Content  string `json:"content"`
	Encoding string `json:"encoding" jsonschema:"text or base64"`
	Size     int64  `json:"size" jsonschema:"the bytes read (at most 64 KiB more than content holds: see note)"`
	Note     string `json:"note,omitempty"`
}

// WriteInput is write_file's input.
type WriteInput struct {
	SandboxID string `json:"sandbox_id"`
	Path      string `json:"path" jsonschema:"an absolute path in the sandbox; its directory must exist"`
	Content   string `json:"content"`
	Encoding  string `json:"encoding,omitempty" jsonschema:"text (default: written as given, UTF-8) or base64"`
	Mode      string `json:"mode,omitempty" jsonschema:"permission bits in octal, e.g. 0755 (default 0644)"`
}

// WriteOutput is write_file's result.
type WriteOutput struct {
	Path  string `json:"path"`
	Bytes int    `json:"bytes"`
}

// ListFilesInput is list_files' input.
type ListFilesInput struct {
	SandboxID string `json:"sandbox_id"`
	Path      string `json:"path" jsonschema:"an absolute directory in the sandbox"`
	Depth     int    `json:"depth,omitempty" jsonschema:"1 (default): its entries; more: its subdirectories' too, to that depth"`
}

// FileInfo is one entry of list_files.
type FileInfo struct {
	Path   string `json:"path"`
	Type   string `json:"type" jsonschema:"file, dir, symlink, fifo, socket, char_device or block_device"`
	Size   int64  `json:"size"`
	Mode   string `json:"mode" jsonschema:"permission bits in octal"`
	MTime  string `json:"mtime"`
	Target string `json:"target,omitempty" jsonschema:"a symbolic link's target"`
}

// ListFilesOutput is list_files' result.
type ListFilesOutput struct {
	Path      string     `json:"path"`
	Entries   []FileInfo `json:"entries"`
	Truncated bool       `json:"truncated,omitempty" jsonschema:"there were more entries than the 1000 listed"`
}

func (s *server) addFileTools(srv *mcp.Server) {
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "read_file",
		Title:       "Read a file",
		Description: "Read a regular file of a sandbox: its first 64 KiB, as text (control characters escaped) or base64.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.readFile)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "write_file",
		Title:       "Write a file",
		Description: "Write a regular file in a ready sandbox (replacing one that is there), owned by the sandbox's user.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true},
	}, s.writeFile)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "list_files",
		Title:       "List a directory",
		Description: "List a directory of a ready sandbox (at most 1000 entries): each entry's path, type, size, mode and time.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.listFiles)
}

func (s *server) readFile(ctx context.Context, _ *mcp.CallToolRequest, in ReadInput) (*mcp.CallToolResult, ReadOutput, error) {
	what := "read " + termsafe.Line(in.Path) + " in " + termsafe.Line(in.SandboxID)
	if err := need(what, "sandbox_id", in.SandboxID); err != nil {
		return nil, ReadOutput{}, err
	}
	if err := need(what, "path", in.Path); err != nil {
		return nil, ReadOutput{}, err
	}
	if in.Encoding != "" && in.Encoding != "text" && in.Encoding != "base64" {
		return nil, ReadOutput{}, argError(what, "encoding %q: want text or base64", termsafe.Line(in.Encoding))
	}
	r, err := s.c.ReadFile(ctx, in.SandboxID, in.Path)
	if err != nil {
		return nil, ReadOutput{}, toolError(what, err)
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, MaxStream))
	if err != nil {
		return nil, ReadOutput{}, toolError(what, err)
	}
	rest, err := io.Copy(io.Discard, io.LimitReader(r, 64<<20))
	if err != nil {
		return nil, ReadOutput{}, toolError(what, err)
	}
	out := ReadOutput{Path: termsafe.Line(in.Path), Size: int64(len(b)) + rest}
	if rest > 0 {
		out.Note = fmt.Sprintf("the file has more than %d bytes: %d cut (the first %d kept)", MaxStream, rest, len(b))
		if rest == 64<<20 {
			out.Note = fmt.Sprintf("the file has more than %d bytes: only the first %d kept", MaxStream+64<<20, len(b))
		}
		if in.Encoding != "base64" {
			b = trimRuneEnd(b)
		}
	}
	if in.Encoding == "base64" || !isText(b) {
		out.Content, out.Encoding = base64.StdEncoding.EncodeToString(b), "base64"
		return nil, out, nil
	}
	out.Content, out.Encoding = safeText(b), "text"
	return nil, out, nil
}

// isText: valid UTF-8 without NUL bytes.
func isText(b []byte) bool { return utf8.Valid(b) && bytes.IndexByte(b, 0) < 0 }

func (s *server) writeFile(ctx context.Context, _ *mcp.CallToolRequest, in WriteInput) (*mcp.CallToolResult, WriteOutput, error) {
	what := "write " + termsafe.Line(in.Path) + " in " + termsafe.Line(in.SandboxID)
	if err := need(what, "sandbox_id", in.SandboxID); err != nil {
		return nil, WriteOutput{}, err
	}
	if err := need(what, "path", in.Path); err != nil {
		return nil, WriteOutput{}, err
	}
	data := []byte(in.Content)
	switch in.Encoding {
	case "", "text", "utf-8":
	case "base64":
		var err error
		if data, err = base64.StdEncoding.DecodeString(in.Content); err != nil {
			return nil, WriteOutput{}, argError(what, "content is not base64: %v", err)
		}
	default:
		return nil, WriteOutput{}, argError(what, "encoding %q: want text or base64", termsafe.Line(in.Encoding))
	}
	var mode os.FileMode
	if in.Mode != "" {
		m, err := strconv.ParseUint(in.Mode, 8, 32)
		if err != nil || m > 0o7777 {
			return nil, WriteOutput{}, argError(what, "mode %q: want octal permission bits such as 0644", termsafe.Line(in.Mode))
		}
		mode = os.FileMode(m)
	}
	if err := s.c.WriteFile(ctx, in.SandboxID, in.Path, bytes.NewReader(data), mode); err != nil {
		return nil, WriteOutput{}, toolError(what, err)
	}
	return nil, WriteOutput{Path: termsafe.Line(in.Path), Bytes: len(data)}, nil
}

func (s *server) listFiles(ctx context.Context, _ *mcp.CallToolRequest, in ListFilesInput) (*mcp.CallToolResult, ListFilesOutput, error) {
	what := "list " + termsafe.Line(in.Path) + " in " + termsafe.Line(in.SandboxID)
	if err := need(what, "sandbox_id", in.SandboxID); err != nil {
		return nil, ListFilesOutput{}, err
	}
	if err := need(what, "path", in.Path); err != nil {
		return nil, ListFilesOutput{}, err
	}
	if in.Depth < 0 {
		return nil, ListFilesOutput{}, argError(what, "depth %d is negative", in.Depth)
	}
	l, err := s.c.ListFiles(ctx, in.SandboxID, in.Path, in.Depth, maxListEntries)
	if err != nil {
		return nil, ListFilesOutput{}, toolError(what, err)
	}
	out := ListFilesOutput{Path: termsafe.Line(l.Path), Entries: []FileInfo{}, Truncated: l.Truncated}
	for _, e := range l.Entries {
		out.Entries = append(out.Entries, FileInfo{
			Path: termsafe.Line(e.Path), Type: termsafe.Line(e.Type), Size: e.Size, Mode: fmt.Sprintf("%04o", e.Mode),
			MTime: e.MTime.UTC().Format(time.RFC3339), Target: termsafe.Line(e.Target),
		})
	}
	return nil, out, nil
}
