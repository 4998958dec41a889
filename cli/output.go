package cli

import (
	"fmt"

	"github.com/airlock-dev/airlock/internal/exitcode"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/projectfs"
	"github.com/airlock-dev/airlock/userconfig"
)

// runOutput prepares run's --output copies: the limit (--output-max, else
// artifacts.output_max of config.toml) and the rules of projectfs.Output. A bad
// --output-max, or an --output path airlock never writes (the project dir
// itself, a manifest layer, .airlockignore, .git, a path .airlockignore leaves
// out), is a usage error (exit 2) before anything starts.
func (a *app) runOutput(r *manifest.Resolved, o runOptions) (*projectfs.Output, error) {
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
	out, err := projectfs.NewOutput(r, max, from)
	if err != nil {
		return nil, exitcode.OfSandbox(err)
	}
	for _, rel := range o.outputs {
		if err := out.Check(rel); err != nil {
			return nil, withCode(ExitUsage, err)
		}
	}
	return out, nil
}
