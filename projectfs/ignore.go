package projectfs

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// IgnoreFile is the project's list of paths left out of a copied project, in
// .dockerignore syntax (the subset build.go describes).
const IgnoreFile = ".airlockignore"

// dockerignore holds the patterns of a context's .dockerignore, in file order.
type dockerignore struct {
	patterns []ignorePattern
	except   bool // some pattern is an exception (!pattern)
}

type ignorePattern struct {
	segs   []string
	negate bool
}

func readDockerignore(dir string) (*dockerignore, error) { return readIgnoreFile(dir, ".dockerignore") }

// readIgnoreFile reads a file of .dockerignore syntax in dir; a missing one leaves
// nothing out.
func readIgnoreFile(dir, name string) (*dockerignore, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return &dockerignore{}, nil
	} else if err != nil {
		return nil, failed("cannot read %s: %v", filepath.Join(dir, name), err)
	}
	return parseDockerignore(string(b)), nil
}

func parseDockerignore(text string) *dockerignore {
	ig := &dockerignore{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		p := ignorePattern{}
		if strings.HasPrefix(line, "!") {
			p.negate = true
			ig.except = true
			line = strings.TrimSpace(line[1:])
		}
		line = strings.TrimPrefix(path.Clean("/"+filepath.ToSlash(line)), "/")
		if line == "" {
			continue // "/" or "." would exclude the whole context
		}
		p.segs = strings.Split(line, "/")
		ig.patterns = append(ig.patterns, p)
	}
	return ig
}

// excluded reports whether the slash path rel is left out: the last pattern that
// matches it, or one of its parent dirs, decides.
func (ig *dockerignore) excluded(rel string) bool {
	segs := strings.Split(rel, "/")
	out := false
	for _, p := range ig.patterns {
		for n := len(segs); n > 0; n-- {
			if matchSegs(p.segs, segs[:n]) {
				out = !p.negate
				break
			}
		}
	}
	return out
}

// matchSegs matches path segments against pattern segments; ** matches any number
// of segments.
func matchSegs(pat, segs []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(segs); i++ {
				if matchSegs(pat[1:], segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		if ok, err := path.Match(pat[0], segs[0]); err != nil || !ok {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}
