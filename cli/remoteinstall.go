package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/client"
)

// remoteCommandEnv names the airlock an ssh:// host runs, as --remote-command.
const remoteCommandEnv = "AIRLOCK_REMOTE_COMMAND"

// remoteBinaryEnv names the file an install copies to an ssh:// host instead
// of this build for its platform (ownBuildFor): a Linux build of the same
// commit, say, on a machine without the cross builds.
const remoteBinaryEnv = "AIRLOCK_REMOTE_BINARY"

func init() { addCommand(newRemoteCommand) }

// newRemoteCommand is `airlock remote`: the airlock of an ssh:// host.
func newRemoteCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "remote",
		Short: "Manage the airlock of an ssh:// host",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "install [ssh://[user@]host[:port]]",
		Short: "Install this build of airlock on an ssh:// host (into the remote user's cache)",
		Long: "install copies this build of airlock, for the host's OS and architecture (`uname -sm` there), to\n" +
			"${XDG_CACHE_HOME:-~/.cache}/airlock/bin/BUILD_ID/airlock of the remote user, checks its SHA-256 there\n" +
			"and its build ID, and does nothing when that build is there already. The host is the argument, else\n" +
			"-H, else " + hostEnv + ". A build for another architecture than this machine's is the file\n" +
			"airlock-linux-ARCH beside this binary (make cross builds them), or the file " + remoteBinaryEnv + "\n" +
			"names. See docs/daemon.md.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			address := a.remoteHost()
			if len(args) == 1 {
				address = args[0]
			}
			if !strings.HasPrefix(address, "ssh://") {
				return withCode(ExitUsage, fmt.Errorf("cannot install: want an ssh://[user@]host[:port] address (the argument, -H or %s), got %q", hostEnv, address))
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			c, err := a.remoteClient(address)
			if err != nil {
				return withCode(ExitUsage, err)
			}
			defer c.Close()
			cerr := c.Connect(ctx)
			if cerr == nil {
				fmt.Fprintf(a.stdout, "airlock build %s is on %s already\n", BuildID, address)
				return nil
			}
			re, ok := client.IsRemoteError(cerr)
			if !ok {
				return withCode(ExitAirlock, fmt.Errorf("cannot reach %s: %w", address, cerr))
			}
			if err := a.checkInstallable(address, re); err != nil {
				return err
			}
			return a.installRemote(ctx, address, re.Platform)
		},
	})
	return cmd
}

// sshOptions are the remote command (--remote-command, else
// AIRLOCK_REMOTE_COMMAND, else remote.command of config.toml) and this build.
func (a *app) sshOptions() (client.SSHOptions, error) {
	o := client.SSHOptions{BuildID: BuildID}
	cmd, from := a.opts.remoteCommand, "--remote-command"
	if cmd == "" {
		cmd, _ = a.getenv(remoteCommandEnv)
		from = remoteCommandEnv
	}
	if cmd == "" {
		cfg, err := a.userConfig()
		if err != nil {
			return o, err
		}
		cmd, from = cfg.Remote.Command, "remote.command of "+cfg.File
	}
	if err := client.CheckRemoteCommand(cmd); err != nil {
		return o, fmt.Errorf("cannot use %s: %w", from, err)
	}
	o.Command = cmd
	return o, nil
}

// remoteCommandSource says where the remote command came from, for errors.
func (a *app) remoteCommandSource() string {
	if a.opts.remoteCommand != "" {
		return "--remote-command"
	}
	if v, _ := a.getenv(remoteCommandEnv); v != "" {
		return remoteCommandEnv
	}
	return "remote.command of config.toml"
}

// connectRemote starts the one ssh connection of an ssh:// client. When the
// remote has no airlock, or another build, it installs this one (--install,
// or yes to a prompt on a terminal) and connects again; else it fails with
// the command to run, exit 2.
func (a *app) connectRemote(ctx context.Context, c *client.Client, address string) error {
	connect := func() error {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return c.Connect(cctx)
	}
	err := connect()
	if err == nil {
		return nil
	}
	re, ok := client.IsRemoteError(err)
	if !ok {
		return withCode(ExitAirlock, fmt.Errorf("cannot reach the airlock daemon at %s: %w", address, err))
	}
	if err := a.checkInstallable(address, re); err != nil {
		return err
	}
	if !a.opts.install && !a.confirmInstall(address, re) {
		return withCode(ExitUsage, fmt.Errorf("cannot use %s: %s%s: install this build (%s) there with `airlock remote install %s`, or run again with --install",
			address, re, platformNote(re), BuildID, address))
	}
	if err := a.installRemote(ctx, address, re.Platform); err != nil {
		return err
	}
	if err := connect(); err != nil {
		return withCode(ExitAirlock, fmt.Errorf("cannot reach the airlock daemon at %s after installing this build there: %w", address, err))
	}
	return nil
}

func platformNote(re *client.RemoteError) string {
	if re.Platform == "" {
		return ""
	}
	return fmt.Sprintf(" (it runs %s)", re.Platform)
}

// checkInstallable refuses to install when the user named the remote
// command: that command is what runs there.
func (a *app) checkInstallable(address string, re *client.RemoteError) error {
	o, err := a.sshOptions()
	if err != nil {
		return withCode(ExitUsage, err)
	}
	if o.Command == "" {
		return nil
	}
	what := re.Error()
	if re.Reason == client.RemoteMissing {
		what = fmt.Sprintf("%s is not there%s", o.Command, platformNote(re))
	}
	return withCode(ExitUsage, fmt.Errorf("cannot use %s: %s; the remote command comes from %s: install airlock there, or unset it so that `airlock remote install %s` installs this build in the remote user's cache",
		address, what, a.remoteCommandSource(), address))
}

// confirmInstall asks on a terminal whether to install this build.
func (a *app) confirmInstall(address string, re *client.RemoteError) bool {
	if !isTerminal(a.stdin) {
		return false
	}
	fmt.Fprintf(a.stderr, "%s: %s%s.\nInstall this build of airlock (%s) into the remote user's ~/.cache/airlock/bin? [y/N] ", address, re, platformNote(re), BuildID)
	line, _ := bufio.NewReader(a.stdin).ReadString('\n')
	answer := strings.ToLower(strings.TrimSpace(line))
	return answer == "y" || answer == "yes"
}

// remotePlatforms maps `uname -sm` to the Go platform of a build.
var remotePlatforms = map[string][2]string{
	"Linux x86_64":  {"linux", "amd64"},
	"Linux amd64":   {"linux", "amd64"},
	"Linux aarch64": {"linux", "arm64"},
	"Linux arm64":   {"linux", "arm64"},
	"linux/amd64":   {"linux", "amd64"},
	"linux/arm64":   {"linux", "arm64"},
}

// sshBase is the ssh command of address without its remote command.
func sshBase(address string) ([]string, error) {
	argv, err := client.SSHCommand(address)
	if err != nil {
		return nil, err
	}
	return argv[:len(argv)-3], nil
}

// installRemote copies this build for the remote's platform (its `uname -sm`
// when platform is "") into the remote user's cache, checks its SHA-256
// there, then that it runs and is this build.
func (a *app) installRemote(ctx context.Context, address, platform string) error {
	base, err := sshBase(address)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	if _, ok := remotePlatforms[platform]; !ok {
		out, err := a.sshOutput(ctx, append(base, "uname", "-sm"), nil)
		if err != nil {
			return withCode(ExitAirlock, fmt.Errorf("cannot find out the OS and architecture of %s: %w", address, err))
		}
		platform = strings.TrimSpace(out)
	}
	p, ok := remotePlatforms[platform]
	if !ok {
		return withCode(ExitUsage, fmt.Errorf("cannot install airlock on %s: it runs %s; airlock's daemon runs on Linux x86_64 and aarch64", address, platform))
	}
	bin, err := ownBuildFor(p[0], p[1])
	if v, _ := a.getenv(remoteBinaryEnv); v != "" {
		bin, err = v, nil
	}
	if err != nil {
		return withCode(ExitUsage, err)
	}
	f, err := os.Open(bin)
	if err != nil {
		return withCode(ExitAirlock, fmt.Errorf("cannot read the build to install: %w", err))
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return withCode(ExitAirlock, fmt.Errorf("cannot read the build to install: %w", err))
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return withCode(ExitAirlock, err)
	}
	if !a.opts.quiet {
		fmt.Fprintf(a.stderr, "Installing airlock build %s (%s/%s) on %s...\n", BuildID, p[0], p[1], address)
	}
	out, err := a.sshOutput(ctx, append(base, "sh", "-c", "'"+installScript(BuildID, sum)+"'"), f)
	if err != nil {
		return withCode(ExitAirlock, fmt.Errorf("cannot install airlock on %s: %w", address, err))
	}
	// `airlock version` of the copy: "airlock VERSION (build ID)".
	if want := "(build " + BuildID + ")"; !strings.Contains(out, want) {
		return withCode(ExitAirlock, fmt.Errorf("cannot install airlock on %s: the copy of %s says %q, not build %s (a build for another platform must be of the same commit: make cross)",
			address, bin, strings.TrimSpace(out), BuildID))
	}
	return nil
}

// installScript is the remote script of an install: the binary on stdin into
// a temporary file of the cache dir, its SHA-256 checked, then moved into
// place and run once for its version. It holds no single quote.
func installScript(buildID, sum string) string {
	return `set -e; d=${XDG_CACHE_HOME:-$HOME/.cache}/airlock/bin/` + buildID + `; mkdir -p "$d"; t="$d/.airlock.$$"; ` +
		`trap "rm -f \"\$t\"" EXIT; cat >"$t"; ` +
		`s=$( (sha256sum "$t" 2>/dev/null || shasum -a 256 "$t") | cut -d" " -f1); ` +
		`if [ "$s" != "` + sum + `" ]; then echo "the copy has SHA-256 $s, not ` + sum + `" >&2; exit 3; fi; ` +
		`chmod 755 "$t"; mv -f "$t" "$d/airlock"; exec "$d/airlock" version`
}

// sshOutput runs an ssh command with stdin and gives its output; the error
// holds what it said on stderr.
func (a *app) sshOutput(ctx context.Context, argv []string, stdin io.Reader) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin = stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(errb.String()); msg != "" {
			return "", fmt.Errorf("%w: %s", err, msg)
		}
		return "", err
	}
	return out.String(), nil
}

// ownBuildFor is the file of this build for goos/goarch: this binary when it
// is for that platform, else airlock-GOOS-GOARCH beside it (what make cross
// builds into bin/).
func ownBuildFor(goos, goarch string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("cannot find this binary: %w", err)
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	if runtime.GOOS == goos && runtime.GOARCH == goarch {
		return exe, nil
	}
	cross := filepath.Join(filepath.Dir(exe), "airlock-"+goos+"-"+goarch)
	if st, err := os.Stat(cross); err == nil && st.Mode().IsRegular() {
		return cross, nil
	}
	return "", errors.New("cannot find a " + goos + "/" + goarch + " build of this airlock (this one is " + runtime.GOOS + "/" + runtime.GOARCH +
		"): put it beside this binary as " + cross + " (make cross builds bin/airlock-" + goos + "-" + goarch + ")")
}
