package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/airlock-dev/airlock/compose"
	"github.com/airlock-dev/airlock/manifest"
)

// fromCompose is what `airlock init --from FILE` writes: the compose file's
// services as [services.*] tables, bind sources relative to the project dir,
// environment values with their ${VAR} as written (airlock substitutes them
// at each run and delivers them privately: no host value lands in the file),
// and, in a comment, every compose key that was not taken.
func fromCompose(ctx context.Context, file, projectDir, image string, profiles, services []string) (string, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return "", fmt.Errorf("cannot find %s: %w", file, err)
	}
	content, err := os.ReadFile(abs)
	if err != nil {
		return "", withCode(ExitUsage, fmt.Errorf("cannot read the compose file: %w", err))
	}
	dotEnv, err := os.ReadFile(filepath.Join(filepath.Dir(abs), ".env"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("cannot read the compose file's .env: %w", err)
	}
	o := compose.Options{File: abs, Content: content, DotEnv: dotEnv, Profiles: profiles, Services: services, Environ: os.Environ(), KeepEnvReferences: true}
	res, errs := compose.Load(ctx, o)
	var dropped []string
	if len(errs) > 0 {
		// Keys airlock cannot honour are left out, and said so; anything else
		// is a config error.
		var other []string
		for _, e := range errs {
			if len(e.Path) < 3 {
				other = append(other, fmt.Sprintf("config error: %s: %s", displayPath(abs), e.Msg))
				continue
			}
			key := e.Path[2]
			if e.Path[2] == "networks" && len(e.Path) == 5 {
				key = "networks." + e.Path[4]
			}
			if !slices.Contains(o.Ignore, key) {
				o.Ignore = append(o.Ignore, key)
			}
			dropped = append(dropped, fmt.Sprintf("%s (%s:%d)", manifest.KeyPath(e.Path...), filepath.Base(abs), e.Line))
		}
		if len(other) > 0 {
			return "", withCode(ExitUsage, errors.New(strings.Join(other, "\n")))
		}
		if res, errs = compose.Load(ctx, o); len(errs) > 0 {
			return "", withCode(ExitUsage, fmt.Errorf("config error: %s:%d: %s: %s", displayPath(abs), errs[0].Line, manifest.KeyPath(errs[0].Path...), errs[0].Msg))
		}
	}
	for _, t := range res.Services {
		svc := t.(map[string]any)
		vols, _ := svc["volumes"].([]any)
		for i, v := range vols {
			s := v.(string)
			if rel, err := filepath.Rel(projectDir, strings.SplitN(s, ":", 2)[0]); err == nil && filepath.IsAbs(s) && !strings.HasPrefix(rel, "..") {
				vols[i] = "./" + filepath.ToSlash(rel) + strings.TrimPrefix(s, strings.SplitN(s, ":", 2)[0])
			}
		}
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# sandbox.toml: written by `airlock init --from %s` (see docs/compose.md).\n", filepath.Base(abs))
	fmt.Fprintf(&b, "# To read the compose file where it is instead, replace the [services.*] tables with\n# [compose]\n# file = %q\n", filepath.Base(abs))
	if len(dropped) > 0 {
		b.WriteString("#\n# Not taken from the compose file (airlock cannot honour them in a sandbox):\n")
		for _, d := range dropped {
			fmt.Fprintf(&b, "#   %s\n", d)
		}
	}
	if tools, reasons := projectTools(projectDir); len(tools) > 0 {
		fmt.Fprintf(&b, "\n# Builtin tools for what the project holds (%s).\ntools = [%s]\n", strings.Join(reasons, ", "), quoteList(tools))
	}
	fmt.Fprintf(&b, "\n[sandbox]\nimage = %q\n", image)
	if len(res.Services) > 0 {
		b.WriteString("\n")
		enc := toml.NewEncoder(&b)
		enc.Indent = ""
		if err := enc.Encode(map[string]any{"services": res.Services}); err != nil {
			return "", fmt.Errorf("cannot write the services: %w", err)
		}
	}
	return b.String(), nil
}

// languageTools are the builtin tools init adds for a file the project holds
// at its root: its language's toolchain and caches.
var languageTools = []struct{ file, tool string }{
	{"go.mod", "go"},
	{"package.json", "npm"},
	{"pyproject.toml", "uv"},
	{"requirements.txt", "uv"},
}

// projectTools lists the builtin tools for the languages projectDir holds,
// and why ("go.mod: go").
func projectTools(projectDir string) (tools, reasons []string) {
	for _, l := range languageTools {
		if st, err := os.Stat(filepath.Join(projectDir, l.file)); err == nil && st.Mode().IsRegular() {
			reasons = append(reasons, l.file+": "+l.tool)
			if !slices.Contains(tools, l.tool) {
				tools = append(tools, l.tool)
			}
		}
	}
	return tools, reasons
}

func quoteList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}
