package docker

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/paths"
)

// The supervisor reaches every sandbox through a Docker volume that holds the airlock
// binary (a static Linux one for the Engine's architecture, see supervisor_bin.go),
// keyed by the architecture and the binary's identity and mounted read-only at /airlock/bin. The
// volume is filled once through the Engine API (a helper container that is created,
// never started, receives the file by CopyToContainer and is removed), so the same
// path works for a remote Engine. Completion is recorded on the Engine itself: a
// second, empty volume "<name>-ok" is created only after the fill succeeded. A volume
// with its -ok companion is never filled again (others may be running from it); one
// without it is (re)filled under a host-wide lock.

const (
	labelSupervisorKey  = "dev.airlock.supervisor"
	labelSupervisorArch = "dev.airlock.supervisor.arch"
	completeMarker      = ".complete"
)

// supervisors are the supervisor volumes of a runtime's Engine: the Engine,
// what it is (for its architecture), the binary to inject (find, else file
// with buildID), the owner key the volumes carry, and the runtime dir of the
// user's own fill lock (paths).
type supervisors struct {
	engine  client.APIClient
	kind    engineKind
	find    func(arch string) (*Supervisor, error)
	file    string
	buildID string
	owner   ownerKey
	paths   *paths.Paths
}

// supervisors are the runtime's supervisor volumes.
func (rt *Runtime) supervisors() *supervisors {
	return &supervisors{engine: rt.Engine, kind: rt.kind(), find: rt.FindSupervisor, file: rt.Binary, buildID: rt.BuildID,
		owner: ownerKey(rt.Owner), paths: rt.Paths}
}

// key identifies the binary this runtime injects on its Engine: the
// Engine's architecture and the binary's key (supervisorKeyFor).
func (s *supervisors) key() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sup, arch, err := s.supervisor(ctx)
	if err != nil {
		return "", err
	}
	return supervisorKeyFor(sup, arch), nil
}

// supervisorKeyFor is the supervisor volume's key: the architecture and the
// binary's identity (build ID, size and modification time of a file; a hash of
// an embedded one).
func supervisorKeyFor(sup *Supervisor, arch string) string {
	h := sha256.Sum256([]byte("linux/" + arch + "|" + sup.Key))
	return hex.EncodeToString(h[:8])
}

// SupervisorVolumeName is the name of sup's supervisor volume on a linux/arch Engine.
func SupervisorVolumeName(sup *Supervisor, arch string) string {
	return "airlock-supervisor-" + supervisorKeyFor(sup, arch)
}

// labels are the labels of a supervisor volume (and its -ok companion).
func (s *supervisors) labels(key string) map[string]string {
	return s.owner.label(map[string]string{labelSupervisorKey: key})
}

// volume returns the name of a complete supervisor volume, filling it when needed.
func (s *supervisors) volume(ctx context.Context, imageRef string) (string, error) {
	sup, arch, err := s.supervisor(ctx)
	if err != nil {
		return "", err
	}
	key := supervisorKeyFor(sup, arch)
	name := "airlock-supervisor-" + key
	if s.complete(ctx, name) {
		return name, nil
	}
	release, _, err := s.lockFill(name)
	if err != nil {
		return "", err
	}
	defer release()
	if s.complete(ctx, name) {
		return name, nil
	}
	_ = s.engine.VolumeRemove(ctx, name+"-ok", true)
	labels := s.labels(key)
	labels[labelSupervisorArch] = arch
	if _, err := s.engine.VolumeCreate(ctx, volume.CreateOptions{Name: name, Labels: labels}); err != nil {
		return "", failed("cannot create volume %s: %v", name, err)
	}
	if err := s.fill(ctx, name, imageRef, sup); err != nil {
		return "", err
	}
	if _, err := s.engine.VolumeCreate(ctx, volume.CreateOptions{Name: name + "-ok", Labels: labels}); err != nil {
		return "", failed("cannot create volume %s-ok: %v", name, err)
	}
	return name, nil
}

// lockFill takes the lock that lets one filler at a time work on
// the supervisor volume name; release gives it up and removes its file, so
// that no lock is left behind (one a build otherwise). Its holder removes the
// file before it unlocks: a filler that then gets the lock of a file no longer
// at its path starts again with the path's new file, which is what a filler
// that came meanwhile locks too.
func (s *supervisors) lockFill(name string) (release func(), lockPath string, err error) {
	for {
		lock, path, err := s.lock(name)
		if err != nil {
			return nil, path, err
		}
		fd := int(lock.Fd())
		if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
			lock.Close()
			return nil, path, failed("cannot lock %s: %v", path, err)
		}
		held, herr := lock.Stat()
		now, nerr := os.Lstat(path)
		if herr == nil && nerr == nil && os.SameFile(held, now) {
			return func() {
				// Root's file in a shared dir is not another user's to
				// remove: it stays, and serves as it is.
				_ = os.Remove(path)
				_ = unix.Flock(fd, unix.LOCK_UN)
				lock.Close()
			}, path, nil
		}
		_ = unix.Flock(fd, unix.LOCK_UN)
		lock.Close()
		if herr != nil || (nerr != nil && !os.IsNotExist(nerr)) {
			return nil, path, failed("cannot lock %s: %v", path, errors.Join(herr, nerr))
		}
	}
}

// lock opens the lock that lets one filler at a time work on a
// supervisor volume: host-wide, whatever the user's data dir, in os.TempDir().
// There any local user may have put a file (or a link) of that name first, so
// it is opened without following links and used only when it is a regular file
// of root's or the user's (paths.OpenSharedLock). Otherwise, and when it cannot
// be opened (a 0600 file of another user's), the user's own lock in the private
// runtime dir is used instead: fills by this user stay one at a time.
func (s *supervisors) lock(name string) (*os.File, string, error) {
	lockPath := filepath.Join(os.TempDir(), name+".lock")
	lock, err := paths.OpenSharedLock(lockPath)
	if err == nil {
		return lock, lockPath, nil
	}
	if s.paths == nil {
		return nil, lockPath, failed("cannot lock %s: %v", lockPath, err)
	}
	shared := err
	if err := s.paths.EnsureRuntimeDir(); err != nil {
		return nil, lockPath, failed("cannot lock %s (%v), nor in %s: %v", lockPath, shared, s.paths.RuntimeDir, err)
	}
	own := filepath.Join(s.paths.RuntimeDir, name+".lock")
	if lock, err = paths.OpenSharedLock(own); err != nil {
		return nil, own, failed("cannot lock %s (%v), nor %s: %v", lockPath, shared, own, err)
	}
	return lock, own, nil
}

// complete reports whether the volume and its -ok companion exist, the
// companion made after the volume.
func (s *supervisors) complete(ctx context.Context, name string) bool {
	v, err := s.engine.VolumeInspect(ctx, name)
	if err != nil {
		return false
	}
	ok, err := s.engine.VolumeInspect(ctx, name+"-ok")
	if err != nil {
		return false
	}
	return ok.CreatedAt >= v.CreatedAt
}

// fill copies sup into the volume name through a helper container of imageRef
// that is created, never started, and removed.
func (s *supervisors) fill(ctx context.Context, name, imageRef string, sup *Supervisor) error {
	c, err := s.engine.ContainerCreate(ctx, &container.Config{
		Image:      imageRef,
		Entrypoint: []string{"/nonexistent"},
		Labels:     s.owner.helperLabels(),
	}, &container.HostConfig{
		NetworkMode: "none",
		Mounts:      []mount.Mount{{Type: mount.TypeVolume, Source: name, Target: "/fill"}},
	}, nil, nil, "")
	if err != nil {
		return failed("cannot fill volume %s: %v", name, err)
	}
	defer removeContainer(context.WithoutCancel(ctx), s.engine, c.ID, container.RemoveOptions{Force: true})
	f, err := sup.Open()
	if err != nil {
		return failed("cannot read %s: %v", sup.Source, err)
	}
	defer f.Close()
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := tw.WriteHeader(&tar.Header{Name: "airlock", Mode: 0o555, Size: sup.Size, ModTime: sup.ModTime, Typeflag: tar.TypeReg})
		if err == nil {
			_, err = io.Copy(tw, f)
		}
		if err == nil {
			err = tw.WriteHeader(&tar.Header{Name: completeMarker, Mode: 0o444, Typeflag: tar.TypeReg, ModTime: sup.ModTime})
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	if err := copyTo(ctx, s.engine, c.ID, "/fill", pr, container.CopyToContainerOptions{}); err != nil {
		pr.CloseWithError(err)
		return failed("cannot copy the supervisor into volume %s: %v", name, err)
	}
	return nil
}
