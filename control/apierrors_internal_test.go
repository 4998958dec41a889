package control

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/client"
)

// reasonConsts are package client's Reason* constants, name to value, read
// from its source.
func reasonConsts(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	files, _ := filepath.Glob("../client/*.go")
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "Reason") || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					out[name.Name], _ = strconv.Unquote(lit.Value)
				}
			}
			return true
		})
	}
	return out
}

// daemonReasons are the reasons the daemon's code can answer with: every
// client.Reason* the package's own (non-test) source names.
func daemonReasons(t *testing.T) []string {
	t.Helper()
	consts := reasonConsts(t)
	files, _ := filepath.Glob("*.go")
	seen := map[string]bool{}
	re := regexp.MustCompile(`client\.(Reason\w+)`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			v, ok := consts[m[1]]
			if !ok {
				t.Fatalf("%s names client.%s, which package client does not define", f, m[1])
			}
			seen[v] = true
		}
	}
	out := slices.Collect(func(yield func(string) bool) {
		for k := range seen {
			if !yield(k) {
				return
			}
		}
	})
	sort.Strings(out)
	return out
}

// TestAPIErrorsDeclared: every reason the daemon's code can answer with is in
// the OpenAPI document's Error reasons and in docs/api.md's table with its
// status; the status of each is declared by some route; and each error status a
// route declares is the status of a reason the code uses.
func TestAPIErrorsDeclared(t *testing.T) {
	var doc struct {
		Paths      map[string]map[string]json.RawMessage
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Enum []string
				}
			}
		}
	}
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		t.Fatal(err)
	}
	enum := doc.Components.Schemas["Error"].Properties["reason"].Enum
	declared := map[int]bool{}
	for p, ops := range doc.Paths {
		for m, raw := range ops {
			var op struct{ Responses map[string]json.RawMessage }
			if json.Unmarshal(raw, &op) != nil {
				continue
			}
			for code := range op.Responses {
				n, err := strconv.Atoi(code)
				if err != nil {
					t.Errorf("%s %s: response %q is not a status", m, p, code)
					continue
				}
				if n >= 400 {
					declared[n] = true
				}
			}
		}
	}
	apiDoc, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	used := map[int]bool{}
	for _, r := range daemonReasons(t) {
		st := statusOf(r)
		used[st] = true
		if !slices.Contains(enum, r) {
			t.Errorf("the daemon answers with reason %s (status %d), which control/openapi.json's Error does not declare", r, st)
		}
		row := regexp.MustCompile("(?m)^\\|[^|\\n]*`" + regexp.QuoteMeta(r) + "`[^|\\n]*\\| " + strconv.Itoa(st) + " \\|")
		if !row.Match(apiDoc) {
			t.Errorf("docs/api.md's error table has no row for %s with status %d", r, st)
		}
		if !declared[st] && r != "method_not_allowed" {
			t.Errorf("reason %s has status %d, which no route of control/openapi.json declares", r, st)
		}
	}
	for st := range declared {
		if !used[st] {
			t.Errorf("control/openapi.json declares status %d, which no reason of the daemon has", st)
		}
	}
}

// TestUnknownRoute: a path the API does not have, and a method a path does not
// take, answer the API's JSON error, not net/http's plain text.
func TestUnknownRoute(t *testing.T) {
	srv := httptest.NewServer((&server{}).routes(nil))
	defer srv.Close()
	for _, tt := range []struct {
		method, path string
		status       int
		reason       string
	}{
		{"GET", "/v1/no-such-route", http.StatusNotFound, "route_not_found"},
		{"GET", "/", http.StatusNotFound, "route_not_found"},
		{"DELETE", "/v1/health", http.StatusMethodNotAllowed, "method_not_allowed"},
	} {
		req, _ := http.NewRequest(tt.method, srv.URL+tt.path, nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var ce client.Error
		if resp.StatusCode != tt.status || resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &ce) != nil || ce.Reason != tt.reason || !strings.Contains(ce.Message, tt.path) {
			t.Errorf("%s %s: %d %s %q, want %d JSON with reason %s naming the path", tt.method, tt.path, resp.StatusCode, resp.Header.Get("Content-Type"), b, tt.status, tt.reason)
		}
		if tt.status == http.StatusMethodNotAllowed && resp.Header.Get("Allow") == "" {
			t.Errorf("%s %s: no Allow header", tt.method, tt.path)
		}
	}
	// The routes themselves still answer.
	resp, err := srv.Client().Get(srv.URL + "/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v1/openapi.json: %d", resp.StatusCode)
	}
}
