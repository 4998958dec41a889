package testenv

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// RunClean runs a package's tests (m.Run) and fails the run when they added
// files or directories to the package directory: tests write only under
// t.TempDir(), so a run leaves the source tree as it found it. It names what
// was added (a new directory once, not its content). Use it in TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testenv.RunClean(m)) }
func RunClean(m *testing.M) int {
	dir, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cannot find the package directory:", err)
		return 1
	}
	before, err := treeEntries(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	added, err := addedEntries(dir, before)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if len(added) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the tests added %d entries to the package directory %s (a test writes only under t.TempDir()):\n  %s\n",
			len(added), dir, strings.Join(added, "\n  "))
		if code == 0 {
			code = 1
		}
	}
	return code
}

// treeEntries lists every file and directory below dir, relative to it.
func treeEntries(dir string) (map[string]bool, error) {
	seen := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		seen[p] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cannot list the package directory: %w", err)
	}
	return seen, nil
}

// addedEntries lists what is below dir now and was not in before, sorted; of
// a new directory only the directory itself.
func addedEntries(dir string, before map[string]bool) ([]string, error) {
	var added []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p != dir && errors.Is(err, fs.ErrNotExist) {
				return nil // removed while we looked
			}
			return err
		}
		if before[p] {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			added = append(added, rel+"/")
			return filepath.SkipDir
		}
		added = append(added, rel)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cannot list the package directory: %w", err)
	}
	slices.Sort(added)
	return added, nil
}
