// Command benchssh measures `airlock -H ssh://root@box run -- true` against a
// local `airlock run -- true`, interleaved in one run, with one ssh handshake's
// time beside them: ssh is the real client and Debian's sshd, in the
// namespaces of a stand-in remote Engine (testenv.RemoteEngine.StartSSHD),
// whose remote user runs the same build. A run through the local daemon on
// that same stand-in Engine (DOCKER_HOST) tells the Engine's share from
// ssh's. It prints medians and records them in docs/benchmarks.md under
// "## SSH". scripts/bench-ssh.sh runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/bench/benchdoc"
	"github.com/airlock-dev/airlock/test/testenv"
)

func main() {
	o := benchdoc.Flags("scripts/bench-ssh.sh")
	runs := flag.Int("runs", 10, "runs of each command")
	flag.Parse()
	benchdoc.Exit("benchssh", bench(o, *runs))
}

func bench(o *benchdoc.Options, runs int) error {
	ctx := context.Background()
	b, err := benchdoc.OpenBusybox(ctx, o.Airlock, "airlock-bench-ssh-", benchdoc.PlainManifest)
	if err != nil {
		return err
	}
	defer b.Close()
	if err := b.WarmUp(); err != nil {
		return err
	}
	re, stopRemote, err := testenv.StartRemoteEngineFor(nil)
	if err != nil {
		return err
	}
	defer func() {
		if err := stopRemote(); err != nil {
			fmt.Fprintln(os.Stderr, "benchssh:", err)
		}
	}()
	if _, err := testenv.BuildBusyboxImage(ctx, re.Client); err != nil {
		return fmt.Errorf("on %s: %w", re.Host, err)
	}
	local, err := os.MkdirTemp("", "airlock-bench-ssh-client-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(local)
	sshd, stopSSHD, err := re.StartSSHDFor(local, b.Airlock)
	if err != nil {
		return err
	}
	defer func() {
		if err := stopSSHD(); err != nil {
			fmt.Fprintln(os.Stderr, "benchssh:", err)
		}
	}()
	host := "ssh://root@" + sshd.Alias
	// A wrapper of ssh that counts its invocations.
	count := filepath.Join(local, "ssh-count")
	wrapDir := filepath.Join(local, "wrap")
	if err := os.Mkdir(wrapDir, 0o755); err != nil {
		return err
	}
	wrapper := "#!/bin/sh\necho x >> '" + count + "'\nexec '" + filepath.Join(sshd.BinDir, "ssh") + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(wrapDir, "ssh"), []byte(wrapper), 0o755); err != nil {
		return err
	}
	withEnv := func(c *exec.Cmd, env ...string) *exec.Cmd {
		c.Env = append(append([]string(nil), c.Env...), env...)
		return c
	}
	overSSH := func() *exec.Cmd {
		return withEnv(b.Command(b.Airlock, "-H", host, "run", "--", "true"), "PATH="+wrapDir+":"+os.Getenv("PATH"))
	}
	onStandIn := func() *exec.Cmd {
		return withEnv(b.Command(b.Airlock, "run", "--", "true"), "DOCKER_HOST="+re.Host)
	}
	handshake := func() *exec.Cmd { return sshd.SSH(ctx, "root", "true") }
	psOverSSH := func() *exec.Cmd {
		return withEnv(b.Command(b.Airlock, "-H", host, "ps"), "PATH="+wrapDir+":"+os.Getenv("PATH"))
	}
	// Warm up: the remote daemon starts, the stand-in gets its supervisor volume.
	for _, c := range []*exec.Cmd{overSSH(), onStandIn(), handshake()} {
		if _, _, err := benchdoc.Timed(c); err != nil {
			return err
		}
	}
	_ = os.Remove(count)
	var tLocal, tSSH, tStandIn, tHandshake, tPS, tPSSSH benchdoc.Timings
	for i := 0; i < runs; i++ {
		if err := tLocal.Add(b.Time(b.Airlock, "run", "--", "true")); err != nil {
			return err
		}
		d, _, err := benchdoc.Timed(overSSH())
		if err := tSSH.Add(d, err); err != nil {
			return err
		}
		d, _, err = benchdoc.Timed(onStandIn())
		if err := tStandIn.Add(d, err); err != nil {
			return err
		}
		d, _, err = benchdoc.Timed(handshake())
		if err := tHandshake.Add(d, err); err != nil {
			return err
		}
		if err := tPS.Add(b.Time(b.Airlock, "ps")); err != nil {
			return err
		}
		d, _, err = benchdoc.Timed(psOverSSH())
		if err := tPSSSH.Add(d, err); err != nil {
			return err
		}
	}
	counted, _ := os.ReadFile(count)
	perRun := float64(strings.Count(string(counted), "\n")) / float64(2*runs)
	mLocal, mSSH, mStandIn, mHS := benchdoc.Median(tLocal), benchdoc.Median(tSSH), benchdoc.Median(tStandIn), benchdoc.Median(tHandshake)
	rows := []benchdoc.Row{
		{Measure: "`airlock run -- true`, local daemon and Engine (median)", Result: benchdoc.MS(mLocal)},
		{Measure: "`airlock -H " + host + " run -- true` (median)", Result: benchdoc.MS(mSSH), Target: "≤ local + one ssh handshake"},
		{Measure: "one ssh handshake, `ssh root@box true` (median)", Result: benchdoc.MS(mHS)},
		{Measure: "ssh run − (local + handshake)", Result: benchdoc.MS(mSSH - mLocal - mHS), Target: "≤ 0 ms"},
		{Measure: "`DOCKER_HOST=<stand-in> airlock run -- true`, the Engine the ssh run uses (median)", Result: benchdoc.MS(mStandIn)},
		{Measure: "ssh run − (stand-in run + handshake)", Result: benchdoc.MS(mSSH - mStandIn - mHS), Target: "≤ 0 ms"},
		{Measure: "`airlock ps`, local (median)", Result: benchdoc.MS(benchdoc.Median(tPS))},
		{Measure: "`airlock -H " + host + " ps` (median)", Result: benchdoc.MS(benchdoc.Median(tPSSSH))},
		{Measure: "ssh processes per command through ssh (run and ps)", Result: fmt.Sprintf("%.1f", perRun), Target: "1"},
	}
	benchdoc.Print(80, rows)
	intro := fmt.Sprintf("`%s`: %d interleaved runs of each on %s; the remote is Debian's sshd in the namespaces of a stand-in Engine (a second dockerd), reached over loopback, whose user runs the same build.",
		o.Command, runs, benchdoc.Machine())
	notes := "The ssh run's sandbox is on the stand-in Engine, so its fair baseline is the `DOCKER_HOST` run on that Engine; the loopback hides network latency, which a real remote adds once per connection (so once per command now)."
	return benchdoc.Write(o.Doc, "SSH", intro, rows, notes)
}
