package docker

import (
	"context"
	"strings"
)

// Shell returns the shell for `up`: sandbox.shell, else the image's SHELL, else /bin/sh.
func (rt *Runtime) Shell(ctx context.Context, sb *Sandbox) []string {
	if sb.manifest != nil && len(sb.manifest.Sandbox.Shell) > 0 {
		return sb.manifest.Sandbox.Shell
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
