// Package docs holds the tests that keep the manual in step with the code it
// describes; it has no code of its own.
package docs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/airlock-dev/airlock"

// pkg is what `go list -json` says of one of airlock's packages.
type pkg struct {
	ImportPath                         string
	GoFiles                            []string
	Imports, TestImports, XTestImports []string
}

// listPackages is every package of the module, the tagged suites (faults,
// soak, kube) included.
func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-tags", "faults soak kube sdk", "-json", "./...")
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []pkg
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		p.ImportPath = short(p.ImportPath)
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// short is an import path relative to the module ("." for its root).
func short(path string) string {
	if path == module {
		return "."
	}
	return strings.TrimPrefix(path, module+"/")
}

// own are the module's packages among paths, short and sorted.
func own(paths []string) []string {
	var out []string
	for _, p := range paths {
		if p == module || strings.HasPrefix(p, module+"/") {
			out = append(out, short(p))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// importsSection renders the generated part of docs/architecture.md: each
// package's layer (0 imports none of airlock's packages; each other is one
// above the highest it imports), and what it imports of airlock and what
// imports it. A package with no code of its own (a test suite) lists what its
// tests import.
func importsSection(pkgs []pkg) string {
	imports := map[string][]string{}
	for _, p := range pkgs {
		if len(p.GoFiles) > 0 {
			imports[p.ImportPath] = own(p.Imports)
		} else {
			imports[p.ImportPath] = own(append(slices.Clone(p.TestImports), p.XTestImports...))
		}
	}
	layer := map[string]int{}
	var depth func(string, int) int
	depth = func(p string, guard int) int {
		if l, ok := layer[p]; ok {
			return l
		}
		l := 0
		if guard < len(imports) { // a cycle cannot happen in Go; bound it anyway
			for _, q := range imports[p] {
				if q != p {
					l = max(l, depth(q, guard+1)+1)
				}
			}
		}
		layer[p] = l
		return l
	}
	importedBy := map[string][]string{}
	for _, p := range slices.Sorted(maps.Keys(imports)) {
		depth(p, 0)
		for _, q := range imports[p] {
			importedBy[q] = append(importedBy[q], p)
		}
	}
	names := slices.Sorted(maps.Keys(imports))
	slices.SortStableFunc(names, func(a, b string) int { return layer[b] - layer[a] })
	var b strings.Builder
	b.WriteString("| layer | package | imports (airlock's packages) | imported by |\n|---|---|---|---|\n")
	code := func(list []string) string {
		if len(list) == 0 {
			return "–"
		}
		var q []string
		for _, s := range list {
			q = append(q, "`"+s+"`")
		}
		return strings.Join(q, ", ")
	}
	for _, n := range names {
		fmt.Fprintf(&b, "| %d | `%s` | %s | %s |\n", layer[n], n, code(imports[n]), code(importedBy[n]))
	}
	return b.String()
}

const (
	beginMark = "<!-- imports: made by `UPDATE_DOCS=1 go test ./docs` from `go list`; do not edit by hand -->\n"
	endMark   = "<!-- end of imports -->"
)

// TestArchitectureImports: the import table of docs/architecture.md is the
// one `go list` gives (run UPDATE_DOCS=1 go test ./docs to write it again).
func TestArchitectureImports(t *testing.T) {
	doc, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i, j := strings.Index(s, beginMark), strings.Index(s, endMark)
	if i < 0 || j < i {
		t.Fatalf("architecture.md has no generated import table (between %q and %q)", strings.TrimSpace(beginMark), endMark)
	}
	want := importsSection(listPackages(t))
	if got := s[i+len(beginMark) : j]; got != want {
		if os.Getenv("UPDATE_DOCS") != "" {
			if err := os.WriteFile("architecture.md", []byte(s[:i+len(beginMark)]+want+s[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("the import table of docs/architecture.md is out of date with the code; run UPDATE_DOCS=1 go test ./docs")
	}
}

// packageRow matches a row of the packages' jobs table: | `path` | job |.
var packageRow = regexp.MustCompile("(?m)^\\| `([a-z0-9_/.]+)`(?:, `([a-z0-9_/.]+)`)* \\| ")

// TestArchitectureJobs: every package has its job told in one sentence in
// docs/architecture.md's table, and the table names no package that is gone.
func TestArchitectureJobs(t *testing.T) {
	doc, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	described := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		if !packageRow.MatchString(line) {
			continue
		}
		cell := strings.SplitN(line, "|", 3)[1]
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(cell, -1) {
			described[m[1]] = true
		}
	}
	exists := map[string]bool{}
	for _, p := range listPackages(t) {
		exists[p.ImportPath] = true
		if !described[p.ImportPath] {
			t.Errorf("package %s has no row in docs/architecture.md's table of jobs", p.ImportPath)
		}
	}
	for p := range described {
		if !exists[p] {
			t.Errorf("docs/architecture.md describes %s, which is not a package (any more)", p)
		}
	}
}
