package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/manifest"
)

// A warm pool's Pods (docs/pool.md) are made parked (Create with Park): their
// supervisor starts what takes no value and waits for a claim on its stdin
// (spec.ClaimStdin), which Claim writes on the run's attach (Attach), as the
// Docker backend does.

// WatchParked follows a parked Pod's status until it cannot serve a claim.
func (rt *Runtime) WatchParked(ctx context.Context, sb *backend.Sandbox, parked func()) error {
	return backend.WatchParkedStatus(ctx, rt, sb.PrimaryID, parked)
}

// Claim delivers a run's claim to a parked Pod's supervisor: one line on the
// stdin of the run's attach, then the run's stdin when the claim takes it; a
// run not attached gets an attach of its own for the line.
func (rt *Runtime) Claim(ctx context.Context, sb *backend.Sandbox, c backend.Claim) error {
	values, err := backend.ClaimDelivery(c)
	if err != nil {
		return err
	}
	line, err := json.Marshal(values)
	if err != nil {
		return failed("cannot encode the claim")
	}
	line = append(line, '\n')
	defer rt.step(sb.ID, "claim")()
	rt.mu.Lock()
	var w *io.PipeWriter
	var in io.Reader
	if st := rt.live[sb.ID]; st != nil {
		w, in = st.claimW, st.claimIn
		st.claimW, st.claimIn = nil, nil
	}
	rt.mu.Unlock()
	if w == nil {
		err = rt.claimAttached(ctx, sb, line)
	} else {
		err = writeClaim(ctx, w, line)
		switch {
		case err != nil:
			w.CloseWithError(err)
		case in != nil && c.Stdin:
			go func() {
				_, err := io.Copy(w, in)
				w.CloseWithError(err)
			}()
		default:
			w.Close()
		}
	}
	if err != nil {
		if !rt.Running(ctx, sb.PrimaryID) {
			return fmt.Errorf("%w: %v", backend.ErrUnhealthy, err)
		}
		return failed("cannot deliver the claim: %v", err)
	}
	rt.mu.Lock()
	if st := rt.live[sb.ID]; st != nil {
		st.resolved, st.parked = c.Manifest, false
	}
	rt.mu.Unlock()
	return nil
}

// writeClaim writes line on an attach's stdin, as long as ctx allows.
func writeClaim(ctx context.Context, w io.Writer, line []byte) error {
	done := make(chan error, 1)
	go func() {
		_, err := w.Write(line)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// claimAttached writes line on the stdin of an attach of its own (the
// primary's stdin is taken once: the claim then takes none). The attach may
// last until the container ends: once the line went out and the attach had a
// moment to pass it on, it is let go.
func (rt *Runtime) claimAttached(ctx context.Context, sb *backend.Sandbox, line []byte) error {
	req := rt.pods().Sub(sb.PrimaryID, "attach", &corev1.PodAttachOptions{Container: MainContainer, Stdin: true})
	ex, err := remotecommand.NewSPDYExecutor(rt.rest, "POST", req.URL())
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sent := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- ex.StreamWithContext(sctx, remotecommand.StreamOptions{Stdin: &sentReader{r: bytes.NewReader(line), sent: sent}})
	}()
	select {
	case err := <-done:
		return err
	case <-sent:
	}
	select {
	case err := <-done:
		return err
	case <-time.After(claimGrace):
		return nil
	}
}

// claimGrace is how long an attach of its own that sent a claim is kept
// open to pass it on.
const claimGrace = time.Second

// sentReader reads r and closes sent at its end.
type sentReader struct {
	r    io.Reader
	sent chan struct{}
	once sync.Once
}

func (s *sentReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err == io.EOF {
		s.once.Do(func() { close(s.sent) })
	}
	return n, err
}

// CopiedPaths are the host paths a Pod of r gets a copy of: the project and
// the [copies] sources (a warm pool's key fingerprints them).
func (rt *Runtime) CopiedPaths(r *manifest.Resolved) []string {
	out := []string{r.ProjectDir}
	for _, name := range slices.Sorted(maps.Keys(r.Copies)) {
		if c := r.Copies[name]; c.Enabled && c.Source != "" {
			out = append(out, c.Source)
		}
	}
	return out
}
