package docker

import (
	"context"
	"strings"

	"github.com/airlock-dev/airlock/backend"
)

// Shell returns the shell for `up`: sandbox.shell, else the image's SHELL, else /bin/sh.
func (rt *Runtime) Shell(ctx context.Context, sb *backend.Sandbox) []string {
	if ownState(sb).manifest != nil && len(ownState(sb).manifest.Sandbox.Shell) > 0 {
		return ownState(sb).manifest.Sandbox.Shell
	}
	ci, err := rt.Engine.ContainerInspect(ctx, sb.PrimaryID)
	if err == nil && ci.Config != nil {
		for _, e := range ci.Config.Env {
			if v, ok := strings.CutPrefix(e, "SHELL="); ok && v != "" {
				return []string{v}
			}
		}
	}
	return []string{"/bin/sh"}
}
