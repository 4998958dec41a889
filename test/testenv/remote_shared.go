package testenv

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// SharedRemoteEngine is one stand-in remote Engine (see RemoteEngine) that the
// tests of a package share: starting a dockerd and building the busybox image
// on it costs the machine about as much as ten containers, and tests that only
// need a remote Engine to hold their sandboxes do not need one each. Each test
// still checks that nothing of its own is left on it (objects carry the test's
// project label). The zero value is ready; Get starts the Engine on first use
// and the package's TestMain calls Stop after the tests.
type SharedRemoteEngine struct {
	once sync.Once
	r    *RemoteEngine
	stop func() error
	err  error
}

// Get returns the shared stand-in, starting it on the first call. The test
// fails when it cannot start (and every later caller with it), or is skipped
// when AIRLOCK_SKIP_DOCKER=1.
func (s *SharedRemoteEngine) Get(t testing.TB) *RemoteEngine {
	t.Helper()
	if skipDocker() {
		t.Skipf("%s=1: skipping test that needs a stand-in remote Docker Engine", SkipDockerEnv)
	}
	s.once.Do(func() {
		s.r, s.stop, s.err = StartRemoteEngineFor(nil)
		if s.err == nil {
			t.Logf("testenv: shared stand-in remote Engine %s (dockerd pid %d, dir %s) answered in %v",
				s.r.Host, s.r.PID, s.r.Dir, s.r.StartTime.Round(time.Millisecond))
		}
	})
	if s.err != nil {
		t.Fatal(s.err)
	}
	return s.r
}

// Stop stops the stand-in if Get started it, leaving no process, mount or
// file behind, and says what it could not clean up.
func (s *SharedRemoteEngine) Stop() error {
	if s.stop == nil {
		return nil
	}
	if err := s.stop(); err != nil {
		return fmt.Errorf("stopping the shared stand-in remote Engine: %w", err)
	}
	return nil
}
