package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/manifest"
	"github.com/spf13/cobra"
)

func init() { addCommand(newInitCommand) }

// starterManifest is what `airlock init` writes; IMAGE is replaced by --image.
const starterManifest = `# sandbox.toml: the airlock sandbox of this project. See docs/manifest.md for every key.
# Uncommitted personal overrides go in sandbox.local.toml beside this file.

# Built-in presets: redis, postgres, mariadb, docker, go, node, python (airlock presets ls).
presets = []
# Builtin tools: git, ssh-agent, claude, codex, go, npm, uv, apt.
tools = []

[sandbox]
image = "IMAGE"
# workdir = ""            # default: the project dir, mounted at its own host path
# user = ""               # default: the image's USER
# shell = ["/bin/bash"]   # for airlock up; default: $SHELL of the image, else /bin/sh
# network = "bridge"      # bridge | none | host
# ports = ["8080"]        # published on 127.0.0.1 (a random host port); "127.0.0.1:18080:8080" to choose it
# cap_add = ["NET_ADMIN"] # single capabilities rather than privileged; cap_drop likewise
# ready_timeout = "60s"

[env]
# DATABASE_URL = "postgres://app@db:5432/app"
# TOKEN = "${GITHUB_TOKEN}"   # from the host environment, else the vault (airlock secrets set)

# [mounts.cache]
# source = "~/.cache/go-build"
# target = "/root/.cache/go-build"
# missing = "create-dir"

# [daemons.web]             # a sidecar started before the main command
# command = ["httpd", "-f", "-p", "8080"]
# ready = { tcp = "127.0.0.1:8080", timeout = "30s" }
# user = "www-data"         # default: the sandbox user
# after = ["setup"]         # starts once setup completed

# [daemons.setup]           # a step run once, to completion, before what names it in after and the main command
# oneshot = true            # exit 0 completes it; any other end fails the start (125)
# command = ["sh", "-c", "mkdir -p /srv/www && echo ok > /srv/www/index.html"]

# [services.db]             # a sibling container, reachable as "db"
# image = "postgres:16"
# env = { POSTGRES_PASSWORD = "${PGPASS:-devonly}" }
# healthcheck = { cmd = ["pg_isready"], interval = "1s", retries = 30 }
`

func newInitCommand(a *app) *cobra.Command {
	var (
		image, from        string
		profiles, services []string
	)
	cmd := &cobra.Command{
		Use:   "init [--from compose.yaml]",
		Short: "Write a commented starter sandbox.toml (never overwrites)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			target := a.opts.file
			if target == "" {
				cwd, err := os.Getwd()
				if err != nil {
					return fmt.Errorf("cannot find the current directory: %w", err)
				}
				target = filepath.Join(cwd, manifest.FileName)
			} else if st, err := os.Stat(target); err == nil && st.IsDir() {
				target = filepath.Join(target, manifest.FileName)
			}
			if strings.ContainsAny(image, "\"\\\n") || image == "" {
				return withCode(ExitUsage, fmt.Errorf("invalid --image %q", image))
			}
			if len(services) > 0 && from == "" {
				return withCode(ExitUsage, errors.New("--services needs --from: the compose file whose services to take"))
			}
			content := strings.Replace(starterManifest, "IMAGE", image, 1)
			if tools, reasons := projectTools(filepath.Dir(target)); len(tools) > 0 {
				content = strings.Replace(content, "tools = []", fmt.Sprintf("tools = [%s]   # for %s", quoteList(tools), strings.Join(reasons, ", ")), 1)
			}
			if from != "" {
				var err error
				if content, err = fromCompose(cmd.Context(), from, filepath.Dir(target), image, profiles, services); err != nil {
					return err
				}
			}
			f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if errors.Is(err, fs.ErrExist) {
				return withCode(ExitFailure, fmt.Errorf("cannot write %s: it already exists (airlock init never overwrites)", displayPath(target)))
			}
			if err != nil {
				return fmt.Errorf("cannot write %s: %w", displayPath(target), err)
			}
			if _, err := f.WriteString(content); err != nil {
				f.Close()
				os.Remove(target)
				return fmt.Errorf("cannot write %s: %w", displayPath(target), err)
			}
			if err := f.Close(); err != nil {
				os.Remove(target)
				return fmt.Errorf("cannot write %s: %w", displayPath(target), err)
			}
			if !a.opts.quiet {
				fmt.Fprintf(a.stdout, "wrote %s\n", displayPath(target))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&image, "image", "debian:bookworm", "image of the sandbox")
	cmd.Flags().StringVar(&from, "from", "", "write the services of this compose file as [services.*] tables (keys airlock cannot honour are listed, not taken)")
	cmd.Flags().StringArrayVar(&profiles, "profile", nil, "with --from: a compose profile to activate (repeatable)")
	cmd.Flags().StringSliceVar(&services, "services", nil, "with --from: take only these services (and what they depend on), e.g. --services db,cache")
	return cmd
}
