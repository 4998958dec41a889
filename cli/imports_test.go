package cli

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// forbiddenDeps are what the command line must not be built with: it speaks
// to sandboxes through the daemon's API only (docs/architecture.md, "The one
// door"). The daemon is handed to it by cmd/airlock; which Engine or cluster
// a sandbox goes to it resolves (package engine and its kubeconfig reader)
// without opening a client.
var forbiddenDeps = []string{
	"github.com/airlock-dev/airlock/backend",
	"github.com/airlock-dev/airlock/backend/docker",
	"github.com/airlock-dev/airlock/backend/kube",
	"github.com/airlock-dev/airlock/control",
	"github.com/airlock-dev/airlock/control/...",
	"github.com/airlock-dev/airlock/daemon",
	"github.com/docker/docker/client",
}

// forbidden reports whether import path p is one of forbiddenDeps.
func forbidden(p string) bool {
	for _, f := range forbiddenDeps {
		if rest, ok := strings.CutSuffix(f, "/..."); ok {
			if strings.HasPrefix(p, rest+"/") {
				return true
			}
		} else if p == f {
			return true
		}
	}
	return false
}

// TestCLIImportsNoDaemon fails, naming the chain of imports, when package cli
// (as built by default and with the tag kube) depends on a backend, the
// daemon or the Engine's client.
func TestCLIImportsNoDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	for _, tags := range []string{"", "kube"} {
		cmd := exec.Command("go", "list", "-deps", "-tags", tags, "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", ".")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -tags %q: %v\n%s", tags, err, stderr.Bytes())
		}
		imports := map[string][]string{}
		sc := bufio.NewScanner(bytes.NewReader(out))
		sc.Buffer(nil, 1<<20)
		root := ""
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 0 {
				continue
			}
			imports[f[0]] = f[1:]
			root = f[0] // -deps lists the package itself last
		}
		// A breadth-first walk from cli: the first chain found to each
		// forbidden package is the shortest.
		from := map[string]string{root: ""}
		queue := []string{root}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			for _, q := range imports[p] {
				if _, seen := from[q]; seen {
					continue
				}
				from[q] = p
				if forbidden(q) {
					chain := []string{q}
					for c := p; c != ""; c = from[c] {
						chain = append([]string{c}, chain...)
					}
					t.Errorf("-tags %q: cli depends on %s: %s", tags, q, strings.Join(chain, " → "))
					continue // one chain per forbidden package
				}
				queue = append(queue, q)
			}
		}
	}
}
