package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// RegistryBinary is the Docker registry server the tests run (Debian package
// docker-registry, installed by ./scripts/engine.sh).
const RegistryBinary = "docker-registry"

// registryStartTimeout bounds the wait for a test registry to answer.
const registryStartTimeout = 20 * time.Second

// registryConfig serves an unauthenticated registry from a test's temporary
// folder; the Engine trusts 127.0.0.0/8 registries over plain HTTP by default.
const registryConfig = `version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
`

// Registry starts a private Docker registry for the test on a free loopback port,
// with its storage in a temporary folder, and returns its address
// ("127.0.0.1:PORT"). It is stopped when the test ends. The test fails when the
// registry binary is missing (install docker-registry) or does not answer.
func Registry(t testing.TB) string {
	t.Helper()
	return startRegistryFor(t, "")
}

// startRegistryFor starts a registry whose configuration ends with extra (YAML
// of more top-level sections, e.g. auth).
func startRegistryFor(t testing.TB, extra string) string {
	t.Helper()
	bin, err := exec.LookPath(RegistryBinary)
	if err != nil {
		t.Fatalf("cannot find %s: install the docker-registry package (./scripts/engine.sh does): %v", RegistryBinary, err)
	}
	dir := t.TempDir()
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // a free port may be taken before the registry binds it
		addr, err := FreeLoopbackAddr()
		if err != nil {
			t.Fatalf("cannot find a free port for a registry: %v", err)
		}
		if lastErr = startRegistry(t, bin, dir, addr, extra); lastErr == nil {
			return addr
		}
	}
	t.Fatalf("cannot start a Docker registry: %v", lastErr)
	return ""
}

func startRegistry(t testing.TB, bin, dir, addr, extra string) error {
	storage := filepath.Join(dir, "storage-"+filepath.Base(addr))
	conf := filepath.Join(dir, "config-"+filepath.Base(addr)+".yml")
	if err := os.WriteFile(conf, append(fmt.Appendf(nil, registryConfig, storage, addr), extra...), 0o644); err != nil {
		return err
	}
	var logs bytes.Buffer
	cmd := exec.Command(bin, "serve", conf)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cannot run %s: %w", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}

	ctx, cancel := context.WithTimeout(context.Background(), registryStartTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	url := "http://" + addr + "/v2/"
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			// 401: a registry with auth answers, asking for credentials.
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
				t.Cleanup(stop)
				return nil
			}
		}
		select {
		case err := <-exited:
			exited <- err // for stop, should it be called
			return fmt.Errorf("registry on %s exited (%v): %s", addr, err, bytes.TrimSpace(logs.Bytes()))
		case <-ctx.Done():
			stop()
			return fmt.Errorf("registry on %s does not answer after %v: %s", addr, registryStartTimeout, bytes.TrimSpace(logs.Bytes()))
		case <-tick.C:
		}
	}
}
