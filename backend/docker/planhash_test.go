package docker

import (
	"testing"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/manifest"
)

// TestPlanHashHidesSubstitutedEnv: the plan-hash label carries no trace of a
// substituted env value (a short token was recovered from it by brute force), while
// a literal value or the image still changes it.
func TestPlanHashHidesSubstitutedEnv(t *testing.T) {
	mk := func(token, literal, image string) *manifest.Resolved {
		var m manifest.Manifest
		m.Sandbox.Image = image
		m.Env = map[string]string{"TOKEN": token, "PLAIN": literal}
		m.Services = map[string]manifest.Service{"db": {Image: image, Env: map[string]string{"PASS": token}}}
		return &manifest.Resolved{Manifest: m, ProjectDir: "/p", Sources: map[string]manifest.Source{
			"env.TOKEN": manifest.Host, "services.db.env.PASS": manifest.Host,
		}}
	}
	base := backend.PlanHash(mk("1234", "a", "img"), "sha256:1")
	if h := backend.PlanHash(mk("9876", "a", "img"), "sha256:1"); h != base {
		t.Errorf("a host-substituted env value changes the plan hash (%s vs %s): it can be brute-forced from the label", h, base)
	}
	if h := backend.PlanHash(mk("1234", "b", "img"), "sha256:1"); h == base {
		t.Error("a literal env value does not change the plan hash")
	}
	if h := backend.PlanHash(mk("1234", "a", "img"), "sha256:2"); h == base {
		t.Error("the image does not change the plan hash")
	}
}
