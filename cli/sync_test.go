package cli

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
)

// fakeFiles is a daemon's files API that keeps the sandbox's copy in memory:
// the regular files by path, and the requests it got.
type fakeFiles struct {
	mu      sync.Mutex
	files   map[string]string
	puts    int
	removes int
}

func (f *fakeFiles) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.Method == http.MethodPut && r.URL.Path == "/v1/sandboxes/sb/files":
		f.puts++
		dir := r.URL.Query().Get("path")
		tr := tar.NewReader(r.Body)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			if h.Typeflag == tar.TypeReg {
				b, _ := io.ReadAll(tr)
				f.files[path.Join(dir, h.Name)] = string(b)
			}
		}
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/sandboxes/sb/files/remove":
		f.removes++
		var req client.RemoveFilesRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || !req.Recursive || !req.MissingOK {
			http.Error(w, fmt.Sprintf("bad remove: %v %+v", err, req), http.StatusBadRequest)
			return
		}
		for _, p := range req.Paths {
			for k := range f.files {
				if k == p || strings.HasPrefix(k, p+"/") {
					delete(f.files, k)
				}
			}
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		http.Error(w, "unexpected "+r.Method+" "+r.URL.String(), http.StatusNotFound)
	}
}

// state is the copy's files under dir, relative to it, and the requests.
func (f *fakeFiles) state(dir string) (files map[string]string, puts, removes int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	files = map[string]string{}
	for k, v := range f.files {
		if rel, ok := strings.CutPrefix(k, dir+"/"); ok {
			files[rel] = v
		}
	}
	return files, f.puts, f.removes
}

// TestProjectSyncBurst: 1000 files written and 100 removed at once reach the
// copy as one tar and one batched remove (a few of each at most, as the
// burst may be cut by its 300 ms bound), what .airlockignore names does not;
// then, scanning instead of watching, an edit still arrives.
func TestProjectSyncBurst(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "proj")
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".airlockignore", "ignored/\n")
	for i := range 100 {
		write(fmt.Sprintf("old/f%d", i), "old")
	}
	f := &fakeFiles{files: map[string]string{}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c := client.NewTCP(strings.TrimPrefix(srv.URL, "http://"), "")
	var warnings strings.Builder
	var wmu sync.Mutex
	warn := func(format string, args ...any) {
		wmu.Lock()
		defer wmu.Unlock()
		fmt.Fprintf(&warnings, format+"\n", args...)
	}
	inside := "/work/proj"
	s, err := newProjectSync(c, dir, inside, warn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	s.start("sb", true) // the whole project first
	if files, _, _ := f.state(inside); len(files) != 101 || files["old/f7"] != "old" {
		t.Fatalf("the first send: %d files, want 101", len(files))
	}
	_, puts0, removes0 := f.state(inside)

	for i := range 1000 {
		write(fmt.Sprintf("new/d%d/f%d", i%10, i), "new")
	}
	write("ignored/big", "host-only")
	if err := os.RemoveAll(filepath.Join(dir, "old")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		files, puts, removes := f.state(inside)
		if len(files) == 1001 && files["new/d3/f993"] == "new" && files[".airlockignore"] != "" {
			if puts-puts0 > 4 || removes-removes0 > 4 {
				t.Errorf("the burst took %d writes and %d removes, want a few", puts-puts0, removes-removes0)
			}
			if _, ok := files["ignored/big"]; ok {
				t.Error("a path .airlockignore names was sent")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the burst did not arrive: %d files (%d writes, %d removes); warnings: %s", len(files), puts, removes, warnings.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	s.startPolling("a test")
	write("new/d0/f0", "edited while scanning")
	deadline = time.Now().Add(10 * time.Second)
	for {
		if files, _, _ := f.state(inside); files["new/d0/f0"] == "edited while scanning" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an edit did not arrive while scanning")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(warnings.String(), "looking for them every 1s instead") {
		t.Errorf("the switch to scans is not said: %q", warnings.String())
	}
}
