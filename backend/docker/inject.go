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

// supervisorKey identifies the binary this runtime injects on its Engine: the
// Engine's architecture and the binary's key (supervisorKeyFor).
func (rt *Runtime) supervisorKey() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sup, arch, err := rt.supervisor(ctx)
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

// supervisorVolume returns the name of a complete supervisor volume, filling it when needed.
func (rt *Runtime) supervisorVolume(ctx context.Context, imageRef string) (string, error) {
	sup, arch, err := rt.supervisor(ctx)
	if err != nil {
		return "", err
	}
	key := supervisorKeyFor(sup, arch)
	name := "airlock-supervisor-" + key
	if rt.volumeComplete(ctx, name) {
		return name, nil
	}
	release, _, err := rt.lockSupervisorFill(name)
	if err != nil {
		return "", err
	}
	defer release()
	if rt.volumeComplete(ctx, name) {
		return name, nil
	}
	_ = rt.Engine.VolumeRemove(ctx, name+"-ok", true)
	labels := rt.supervisorLabels(key)
	labels[labelSupervisorArch] = arch
	if _, err := rt.Engine.VolumeCreate(ctx, volume.CreateOptions{Name: name, Labels: labels}); err != nil {
		return "", failed("cannot create volume %s: %v", name, err)
	}
	if err := rt.fillVolume(ctx, name, imageRef, sup); err != nil {
		return "", err
	}
	if _, err := rt.Engine.VolumeCreate(ctx, volume.CreateOptions{Name: name + "-ok", Labels: labels}); err != nil {
		return "", failed("cannot create volume %s-ok: %v", name, err)
	}
	return name, nil
}

// lockSupervisorFill takes the lock that lets one filler at a time work on
// the supervisor volume name; release gives it up and removes its file, so
// that no lock is left behind (one a build otherwise). Its holder removes the
// file before it unlocks: a filler that then gets the lock of a file no longer
// at its path starts again with the path's new file, which is what a filler
// that came meanwhile locks too.
func (rt *Runtime) lockSupervisorFill(name string) (release func(), lockPath string, err error) {
	for {
		lock, path, err := rt.supervisorLock(name)
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

// supervisorLock opens the lock that lets one filler at a time work on a
// supervisor volume: host-wide, whatever the user's data dir, in os.TempDir().
// There any local user may have put a file (or a link) of that name first, so
// it is opened without following links and used only when it is a regular file
// of root's or the user's (paths.OpenSharedLock). Otherwise, and when it cannot
// be opened (a 0600 file of another user's), the user's own lock in the private
// runtime dir is used instead: fills by this user stay one at a time.
func (rt *Runtime) supervisorLock(name string) (*os.File, string, error) {
	lockPath := filepath.Join(os.TempDir(), name+".lock")
	lock, err := paths.OpenSharedLock(lockPath)
	if err == nil {
		return lock, lockPath, nil
	}
	if rt.Paths == nil {
		return nil, lockPath, failed("cannot lock %s: %v", lockPath, err)
	}
	shared := err
	if err := rt.Paths.EnsureRuntimeDir(); err != nil {
		return nil, lockPath, failed("cannot lock %s (%v), nor in %s: %v", lockPath, shared, rt.Paths.RuntimeDir, err)
	}
	own := filepath.Join(rt.Paths.RuntimeDir, name+".lock")
	if lock, err = paths.OpenSharedLock(own); err != nil {
		return nil, own, failed("cannot lock %s (%v), nor %s: %v", lockPath, shared, own, err)
	}
	return lock, own, nil
}

// volumeComplete reports whether the volume and its -ok companion exist, the
// companion made after the volume.
func (rt *Runtime) volumeComplete(ctx context.Context, name string) bool {
	v, err := rt.Engine.VolumeInspect(ctx, name)
	if err != nil {
		return false
	}
	ok, err := rt.Engine.VolumeInspect(ctx, name+"-ok")
	if err != nil {
		return false
	}
	return ok.CreatedAt >= v.CreatedAt
}

func (rt *Runtime) fillVolume(ctx context.Context, name, imageRef string, sup *Supervisor) error {
	c, err := rt.Engine.ContainerCreate(ctx, &container.Config{
		Image:      imageRef,
		Entrypoint: []string{"/nonexistent"},
		Labels:     rt.helperLabels(),
	}, &container.HostConfig{
		NetworkMode: "none",
		Mounts:      []mount.Mount{{Type: mount.TypeVolume, Source: name, Target: "/fill"}},
	}, nil, nil, "")
	if err != nil {
		return failed("cannot fill volume %s: %v", name, err)
	}
	defer rt.removeContainer(context.WithoutCancel(ctx), c.ID, container.RemoveOptions{Force: true})
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
	if err := rt.copyTo(ctx, c.ID, "/fill", pr, container.CopyToContainerOptions{}); err != nil {
		pr.CloseWithError(err)
		return failed("cannot copy the supervisor into volume %s: %v", name, err)
	}
	return nil
}
