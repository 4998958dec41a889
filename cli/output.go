package cli

import (
	"fmt"

	"github.com/airlock-dev/airlock/backend/docker"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/userconfig"
)

// runOutput prepares run's --output copies: the limit (--output-max, else
// artifacts.output_max of config.toml) and the rules of docker.Output. A bad
// --output-max, or an --output path airlock never writes (the project dir
// itself, a manifest layer, .airlockignore, .git, a path .airlockignore leaves
// out), is a usage error (exit 2) before anything starts.
func (a *app) runOutput(r *manifest.Resolved, o runOptions) (*docker.Output, error) {
	max, from := int64(0), "--output-max"
	if o.outputMax != "" {
		n, err := userconfig.ParseSize(o.outputMax)
		if err != nil {
			return nil, withCode(ExitUsage, fmt.Errorf("invalid --output-max: %w", err))
		}
		max = n
	}
	if len(o.outputs) == 0 {
		return nil, nil
	}
	if max == 0 {
		cfg, err := a.userConfig()
		if err != nil {
			return nil, err
		}
		max, from = cfg.Artifacts.OutputMax, "artifacts.output_max of config.toml; --output-max overrides it"
	}
	out, err := docker.NewOutput(r, max, from)
	if err != nil {
		return nil, sandboxError(err)
	}
	for _, rel := range o.outputs {
		if err := out.Check(rel); err != nil {
			return nil, withCode(ExitUsage, err)
		}
	}
	return out, nil
}
