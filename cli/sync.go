package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/projectfs"
)

// Keeping a copied project in step (docs/sync.md): while `up` holds its
// shell, the host's edits under the project dir are sent into the sandbox's
// copy through the files API, one way, .airlockignore honoured. A burst of
// changes (a branch switch) goes as one tar of what is there now and one
// batched remove of what is gone.

const (
	// syncQuiet ends a burst: this long without a change, it is sent.
	syncQuiet = 40 * time.Millisecond
	// syncMaxWait sends a burst that goes on this long after its first change.
	syncMaxWait = 300 * time.Millisecond
	// syncPollInterval is how often the project is scanned where it cannot
	// be watched (no inotify, or its watches ran out).
	syncPollInterval = time.Second
	// syncRetry is the wait after a failed send before trying again.
	syncRetry = time.Second
	// syncRemoveBatch is the most paths of one remove request.
	syncRemoveBatch = 5000
)

// projectSync keeps the project's copy in sandbox id in step with dir.
type projectSync struct {
	c      *client.Client
	id     string
	dir    string // the project dir on this host
	inside string // its path in the sandbox
	warn   func(format string, args ...any)

	mu      sync.Mutex
	proj    *projectfs.Project
	dirty   map[string]bool // slash paths relative to dir that changed
	first   time.Time       // the first change of the burst being gathered
	last    time.Time       // its latest change
	kick    chan struct{}   // a change was marked (1-buffered)
	polling bool            // scanning instead of watching
	scan    map[string]scanEntry
	warned  map[string]bool // what was said once

	stopWatch func()
	cancel    context.CancelFunc
	done      chan struct{}
}

// scanEntry is what the scanner compares of a path between two scans.
type scanEntry struct {
	mode  fs.FileMode
	size  int64
	mtime time.Time
	ino   uint64
}

// newProjectSync starts watching dir (inotify, or periodic scans where it
// cannot); nothing is sent before start.
func newProjectSync(c *client.Client, dir, inside string, warn func(string, ...any)) (*projectSync, error) {
	proj, err := projectfs.ReadProject(dir)
	if err != nil {
		return nil, err
	}
	s := &projectSync{c: c, dir: dir, inside: inside, warn: warn, proj: proj, dirty: map[string]bool{}, kick: make(chan struct{}, 1), done: make(chan struct{})}
	stop, werr := watchProject(s)
	if werr != nil {
		s.startPolling(werr.Error())
	} else {
		s.stopWatch = stop
	}
	return s, nil
}

// excluded reports whether the slash path rel is left out of the copy.
func (s *projectSync) excluded(rel string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proj.Excluded(rel)
}

// mark records that rel changed.
func (s *projectSync) mark(rel string) {
	s.mu.Lock()
	now := time.Now()
	if len(s.dirty) == 0 {
		s.first = now
	}
	s.last = now
	s.dirty[rel] = true
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// startPolling switches to periodic scans (the watches stopped, if any),
// saying why once.
func (s *projectSync) startPolling(why string) {
	s.mu.Lock()
	if s.polling {
		s.mu.Unlock()
		return
	}
	s.polling = true
	stop := s.stopWatch
	s.stopWatch = nil
	s.mu.Unlock()
	if stop != nil {
		go stop()
	}
	s.warn("cannot watch %s for changes (%s); looking for them every %v instead", s.dir, why, syncPollInterval)
	s.scan = s.scanTree()
	go s.poll()
}

// start sends what changed from now on into sandbox id; with all, the whole
// project first (a sandbox started again has the copy of its last session).
func (s *projectSync) start(id string, all bool) {
	s.id = id
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if all {
		// Before the shell opens: it sees the project as it is now.
		if err := s.send(ctx, map[string]bool{".": true}); err != nil {
			s.warn("cannot bring the project into sandbox %s: %v; trying again", id, err)
			s.mark(".")
		}
	}
	go s.run(ctx)
}

// stop ends the sync: what was gathered and not sent is dropped.
func (s *projectSync) stop() {
	s.mu.Lock()
	stop := s.stopWatch
	s.stopWatch = nil
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
	if s.cancel != nil {
		s.cancel()
		<-s.done
	}
	s.mu.Lock()
	s.polling = false // ends poll
	s.mu.Unlock()
}

// run sends each burst once it is over.
func (s *projectSync) run(ctx context.Context) {
	defer close(s.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		}
		// Wait for the burst to end: quiet for syncQuiet, or syncMaxWait
		// since it began.
		for {
			s.mu.Lock()
			n, first, last := len(s.dirty), s.first, s.last
			s.mu.Unlock()
			if n == 0 {
				break
			}
			now := time.Now()
			wait := min(last.Add(syncQuiet).Sub(now), first.Add(syncMaxWait).Sub(now))
			if wait <= 0 {
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		s.mu.Lock()
		batch := s.dirty
		s.dirty = map[string]bool{}
		s.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		if err := s.send(ctx, batch); err != nil {
			if ctx.Err() != nil {
				return
			}
			switch {
			case isReason(err, client.ReasonSandboxNotFound):
				s.warn("cannot bring the project's changes into sandbox %s: %v; no more changes are sent", s.id, err)
				return
			case isReason(err, client.ReasonTooLarge) || isReason(err, client.ReasonPermissionDenied) || isReason(err, client.ReasonInvalidRequest):
				// Not better a second time: these changes are dropped,
				// and sent again once they change again.
				s.warn("cannot bring the project's changes into sandbox %s: %v; left out until they change again", s.id, err)
				continue
			}
			s.warn("cannot bring the project's changes into sandbox %s: %v; trying again", s.id, err)
			for rel := range batch {
				s.mark(rel)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(syncRetry):
			}
		}
	}
}

// send brings the paths of batch in step: what is gone removed (one request
// a syncRemoveBatch paths), what is there written (one tar).
func (s *projectSync) send(ctx context.Context, batch map[string]bool) error {
	if batch[projectfs.IgnoreFile] || batch["."] {
		proj, err := projectfs.ReadProject(s.dir)
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.proj = proj
		s.mu.Unlock()
		if batch[projectfs.IgnoreFile] {
			batch["."] = true // what it names now, or no more
		}
	}
	s.mu.Lock()
	proj := s.proj
	s.mu.Unlock()
	var gone, there []string
	for _, rel := range slices.Sorted(maps.Keys(batch)) {
		if proj.Excluded(rel) || under(rel, gone) {
			continue
		}
		if _, err := os.Lstat(filepath.Join(s.dir, filepath.FromSlash(rel))); err != nil {
			if errors.Is(err, fs.ErrNotExist) || isNotDir(err) {
				gone = append(gone, rel)
				continue
			}
			return err
		}
		if batch["."] && rel != "." {
			continue // sent with the whole project
		}
		there = append(there, rel)
	}
	if err := s.remove(ctx, gone); err != nil {
		return err
	}
	if len(there) == 0 {
		return nil
	}
	res, err := s.write(ctx, proj, there)
	if isReason(err, client.ReasonIsDirectory) || isReason(err, client.ReasonNotDirectory) {
		// A path changed kind (a file where the copy has a directory, or
		// the other way round), which a write does not replace: what is
		// sent is removed first, then written again.
		var again []string
		for _, rel := range there {
			if rel != "." {
				again = append(again, rel)
			}
		}
		if len(again) < len(there) {
			// The whole project: its dir is not removed. Said once, not
			// tried again.
			s.warn("cannot bring all of the project into sandbox %s: %v (`airlock down` then `airlock up` makes a fresh copy)", s.id, err)
			return nil
		}
		if err := s.remove(ctx, again); err != nil {
			return err
		}
		res, err = s.write(ctx, proj, there)
	}
	if err != nil {
		return err
	}
	if res != nil {
		// Gone or changed while read: sent (or removed) with the next burst.
		for _, rel := range append(res.Vanished, res.Changed...) {
			s.mark(rel)
		}
		for _, rel := range res.Unreadable {
			s.warnOnce(rel, "cannot read %s: left out of the sandbox's copy", filepath.Join(s.dir, filepath.FromSlash(rel)))
		}
	}
	return nil
}

// warnOnce warns about key the first time only.
func (s *projectSync) warnOnce(key, format string, args ...any) {
	s.mu.Lock()
	if s.warned == nil {
		s.warned = map[string]bool{}
	}
	seen := s.warned[key]
	s.warned[key] = true
	s.mu.Unlock()
	if !seen {
		s.warn(format, args...)
	}
}

// write writes the project's paths rels into the sandbox's copy: one tar.
func (s *projectSync) write(ctx context.Context, proj *projectfs.Project, rels []string) (*projectfs.SyncResult, error) {
	var res *projectfs.SyncResult
	pr, pw := io.Pipe()
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		var err error
		res, err = proj.WritePaths(pw, rels)
		pw.CloseWithError(err)
	}()
	err := s.c.WriteArchive(ctx, s.id, path.Dir(s.inside), pr)
	pr.CloseWithError(io.ErrClosedPipe)
	<-wrote
	return res, err
}

// remove removes rels from the sandbox's copy, a batch a request; a path a
// JSON string cannot carry (not UTF-8) goes on its own.
func (s *projectSync) remove(ctx context.Context, rels []string) error {
	var paths []string
	for _, rel := range rels {
		p := path.Join(s.inside, rel)
		if !utf8.ValidString(p) {
			if err := s.c.RemoveFile(ctx, s.id, p, true); err != nil && !isReason(err, client.ReasonPathNotFound) {
				return err
			}
			continue
		}
		paths = append(paths, p)
	}
	for len(paths) > 0 {
		n := min(len(paths), syncRemoveBatch)
		if err := s.c.RemoveFiles(ctx, s.id, &client.RemoveFilesRequest{Paths: paths[:n], Recursive: true, MissingOK: true}); err != nil {
			return err
		}
		paths = paths[n:]
	}
	return nil
}

// isReason reports whether err is the daemon's error of that reason.
func isReason(err error, reason string) bool {
	var ce *client.Error
	return errors.As(err, &ce) && ce.Reason == reason
}

// under reports whether rel is below one of dirs (sorted before it).
func under(rel string, dirs []string) bool {
	for _, d := range dirs {
		if d == "." || strings.HasPrefix(rel, d+"/") {
			return true
		}
	}
	return false
}

// poll scans the project every syncPollInterval and marks what differs.
func (s *projectSync) poll() {
	t := time.NewTicker(syncPollInterval)
	defer t.Stop()
	for range t.C {
		s.mu.Lock()
		on := s.polling
		s.mu.Unlock()
		if !on {
			return
		}
		now := s.scanTree()
		for rel, e := range now {
			if old, ok := s.scan[rel]; !ok || old != e {
				s.mark(rel)
			}
		}
		for rel := range s.scan {
			if _, ok := now[rel]; !ok {
				s.mark(rel)
			}
		}
		s.scan = now
	}
}

// scanTree lists the project's paths less the excluded ones.
func (s *projectSync) scanTree() map[string]scanEntry {
	m := map[string]scanEntry{}
	_ = filepath.WalkDir(s.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(s.dir, p)
		rel = filepath.ToSlash(rel)
		if rel != "." && s.excluded(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		e := scanEntry{mode: info.Mode(), size: info.Size(), mtime: info.ModTime(), ino: inodeOf(info)}
		if info.IsDir() {
			e.size, e.mtime = 0, time.Time{} // a directory's own changes are its entries'
		}
		m[rel] = e
		return nil
	})
	return m
}

// syncNotice is the line `up` prints when it keeps the copy in step.
func syncNotice(dir, inside string) string {
	if dir == inside {
		return fmt.Sprintf("airlock: keeping the sandbox's copy of %s in step with this host's edits (up --sync=false turns it off)", dir)
	}
	return fmt.Sprintf("airlock: keeping %s in the sandbox in step with this host's edits of %s (up --sync=false turns it off)", inside, dir)
}
