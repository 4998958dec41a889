package images

import (
	"slices"
	"testing"
)

// TestBuildTagsOfEngines: a built image's tag is airlock-build/… as Docker lists
// it and docker.io/airlock-build/… as Podman's Docker-compatible API does (the
// same name, fully qualified); other repositories are not airlock's.
func TestBuildTagsOfEngines(t *testing.T) {
	got := buildTags([]string{"docker.io/airlock-build/p:2", "airlock-build/p:1", "docker.io/library/busybox:1", "other/airlock-build:x",
		"registry.example/airlock-build/p:3", "docker.io/airlock-buildx/p:4"})
	want := []string{"airlock-build/p:1", "docker.io/airlock-build/p:2"}
	if !slices.Equal(got, want) {
		t.Errorf("buildTags = %q; want %q", got, want)
	}
}
