//go:build projects

package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/test/clitest"
)

// sdkOverSSHScript drives a sandbox with the Python SDK over AIRLOCK_HOST
// (ssh://): create (which follows the events until ready), a streamed exec, a
// followed event stream closed early, the deletion.
const sdkOverSSHScript = `
import os, airlock
c = airlock.Client()
print("address", c.address)
manifest = '[sandbox]\nimage = "%s"\nnetwork = "none"\n\n[env]\nWHO = "${WHO}"\n' % os.environ["SDK_TEST_IMAGE"]
with c.create(manifest, vars={"WHO": "over sshd"}, timeout=120) as sb:
    print("state", sb.info.state)
    with sb.exec_stream(["sh", "-c", "cat; echo $WHO; echo e >&2; exit 5"], stdin=b"in\n") as s:
        frames = list(s)
    print("exec", s.exit_code, b"".join(f.data for f in frames if f.stream == "stdout"),
          b"".join(f.data for f in frames if f.stream == "stderr"))
    with sb.events(from_seq=sb.refresh().last_seq) as events:
        sb.run("true")
        for ev in events:
            if ev.kind == "exec.finished":
                print("event", ev.kind)
                break
    sid = sb.id
print("after", c.get(sid).state)
`

// sdkOverSSHAsyncScript does the same with the asyncio client (ssh as an
// asyncio subprocess), and prints the same.
const sdkOverSSHAsyncScript = `
import asyncio, os, airlock.aio
async def main():
    c = airlock.aio.AsyncClient()
    print("address", c.address)
    manifest = '[sandbox]\nimage = "%s"\nnetwork = "none"\n\n[env]\nWHO = "${WHO}"\n' % os.environ["SDK_TEST_IMAGE"]
    async with await c.create(manifest, vars={"WHO": "over sshd"}, timeout=120) as sb:
        print("state", sb.info.state)
        async with sb.exec_stream(["sh", "-c", "cat; echo $WHO; echo e >&2; exit 5"], stdin=b"in\n") as s:
            frames = [f async for f in s]
        print("exec", s.exit_code, b"".join(f.data for f in frames if f.stream == "stdout"),
              b"".join(f.data for f in frames if f.stream == "stderr"))
        async with sb.events(from_seq=(await sb.refresh()).last_seq) as events:
            await sb.run("true")
            async for ev in events:
                if ev.kind == "exec.finished":
                    print("event", ev.kind)
                    break
        sid = sb.id
    print("after", (await c.get(sid)).state)
asyncio.run(main())
`

// TestPythonSDKOverSSHD: the Python SDK's streamed answers (create, a
// streamed exec, events) through the real ssh client and Debian's sshd, to
// the daemon of a remote user of the stand-in remote Engine (started on
// demand by `airlock daemon dial-stdio`), with the sync client and the
// asyncio one. Nothing on stderr: no traceback, no "broken pipe" for the
// streams the SDK closed.
func TestPythonSDKOverSSHD(t *testing.T) {
	limit(t)
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("the Python SDK's tests need python3 (./scripts/engine.sh installs it): %v", err)
	}
	remote := sharedRemote.Get(t)
	image := remote.BusyboxImage(t)
	sshd := remote.StartSSHD(t, clitest.Bin)
	sdk, err := filepath.Abs(filepath.Join("..", "sdk", "python"))
	if err != nil {
		t.Fatal(err)
	}
	want := "address ssh://root@" + sshd.Alias + "\nstate ready\nexec 5 b'in\\nover sshd\\n' b'e\\n'\nevent exec.finished\nafter deleted\n"
	for _, tc := range []struct{ name, script string }{{"sync", sdkOverSSHScript}, {"asyncio", sdkOverSSHAsyncScript}} {
		ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
		cmd := exec.CommandContext(ctx, python, "-c", tc.script)
		cmd.Dir = t.TempDir()
		cmd.Env = []string{
			"PATH=" + sshd.BinDir + ":" + os.Getenv("PATH"),
			"HOME=" + cmd.Dir,
			"PYTHONPATH=" + sdk,
			"PYTHONDONTWRITEBYTECODE=1",
			"AIRLOCK_HOST=ssh://root@" + sshd.Alias,
			"SDK_TEST_IMAGE=" + image,
		}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err = cmd.Run()
		cancel()
		if err != nil || stdout.String() != want || stderr.Len() != 0 {
			t.Errorf("the %s SDK over sshd: %v\nstdout:\n%s\nwant:\n%s\nstderr:\n%s", tc.name, err, stdout.String(), want, stderr.String())
		}
	}
	contains(t, "sshd's log", sshd.Log(), "Accepted publickey for root")
	if problems := sshd.Stop(); len(problems) > 0 {
		t.Errorf("stopping the remote daemon and sshd:\n  %s", strings.Join(problems, "\n  "))
	}
	if left := sshd.Left(); len(left) > 0 {
		t.Errorf("left of sshd: %v", left)
	}
}
