// Command housestats prints the figures that say how the code is laid out:
// the largest files and functions (tests left out), the types with the most
// methods, and the imports that run against the architecture's rooms. It reads
// the source and `go list`; it changes nothing.
//
//	go run ./tools/housestats [-n 10]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

const module = "github.com/airlock-dev/airlock/"

type pkg struct {
	ImportPath   string
	Dir          string
	GoFiles      []string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

type sized struct {
	name  string
	lines int
}

func main() {
	n := flag.Int("n", 10, "how many rows a table")
	flag.Parse()
	pkgs, err := list()
	if err != nil {
		fmt.Fprintln(os.Stderr, "housestats:", err)
		os.Exit(1)
	}
	var files, funcs []sized
	methods := map[string]int{}
	fset := token.NewFileSet()
	for _, p := range pkgs {
		rel := strings.TrimPrefix(p.ImportPath, module)
		for _, f := range p.GoFiles {
			path := filepath.Join(p.Dir, f)
			file, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				fmt.Fprintln(os.Stderr, "housestats:", err)
				os.Exit(1)
			}
			tf := fset.File(file.Pos())
			files = append(files, sized{rel + "/" + f, tf.LineCount()})
			for _, d := range file.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				name := fd.Name.Name
				if fd.Recv != nil && len(fd.Recv.List) == 1 {
					recv := typeName(fd.Recv.List[0].Type)
					name = recv + "." + name
					methods[rel+"."+recv]++
				}
				lines := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
				funcs = append(funcs, sized{rel + "." + name, lines})
			}
		}
	}
	var types []sized
	for k, v := range methods {
		types = append(types, sized{k, v})
	}
	table(os.Stdout, "largest files (lines)", files, *n)
	table(os.Stdout, "largest functions (lines)", funcs, *n)
	table(os.Stdout, "types with the most methods", types, 5)
	up := upward(pkgs)
	fmt.Printf("## imports against the rooms (%d)\n", len(up))
	for _, u := range up {
		fmt.Println("-", u)
	}
}

func typeName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return typeName(t.X)
	case *ast.IndexExpr:
		return typeName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}

func table(w io.Writer, title string, rows []sized, n int) {
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].lines != rows[j].lines {
			return rows[i].lines > rows[j].lines
		}
		return rows[i].name < rows[j].name
	})
	fmt.Fprintf(w, "## %s\n", title)
	for i := 0; i < n && i < len(rows); i++ {
		fmt.Fprintf(w, "%5d %s\n", rows[i].lines, rows[i].name)
	}
}

func list() ([]pkg, error) {
	cmd := exec.Command("go", "list", "-tags", "faults soak kube sdk", "-json", "./...")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("cannot run go list: %w", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("cannot read go list's output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

// room names the part of the tree a package belongs to, for the rules below.
func room(p string) string {
	switch {
	case p == "sandbox" || p == "backend/docker": // the Docker backend, before and after its move
		return "docker"
	case p == "kube" || p == "backend/kube":
		return "kube"
	case strings.HasPrefix(p, "internal/bench") || strings.HasPrefix(p, "internal/clitest") ||
		strings.HasPrefix(p, "internal/testenv") || strings.HasPrefix(p, "internal/cmd/"):
		return "internal-tooling"
	case strings.HasPrefix(p, "internal/"):
		return "internal"
	case p == "test/testenv" || p == "test/clitest" || strings.HasPrefix(p, "bench/") || strings.HasPrefix(p, "tools/"):
		return "tooling"
	}
	return p
}

// upward lists the imports that run against the architecture: a product
// library (internal/) that imports airlock's packages above it, one backend
// importing another, the command line importing a backend, the daemon's
// internals or the Docker client.
func upward(pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		from := strings.TrimPrefix(p.ImportPath, module)
		fr := room(from)
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, "github.com/docker/docker/client") && fr == "cli" {
				out = append(out, from+" → "+imp)
				continue
			}
			if !strings.HasPrefix(imp, module) {
				continue
			}
			to := strings.TrimPrefix(imp, module)
			tr := room(to)
			bad := false
			switch {
			case fr == "internal" && tr != "internal":
				bad = true
			case fr == "internal-tooling" && (tr == "docker" || tr == "kube"):
				bad = true
			case fr == "kube" && tr == "docker", fr == "docker" && tr == "kube":
				bad = true
			case fr == "cli" && (tr == "docker" || tr == "kube" || to == "backend" || to == "daemon" || to == "control" || strings.HasPrefix(to, "control/")):
				bad = true
			}
			if bad {
				out = append(out, from+" → "+to)
			}
		}
	}
	sort.Strings(out)
	return out
}
