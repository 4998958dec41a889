package docker

import (
	"testing"
	"time"
)

// TestRecentImages: what a prepare found of an image serves the creates after
// it; an answer to an earlier question never replaces a later one's; an
// image no prepare found is asked of the Engine.
func TestRecentImages(t *testing.T) {
	var ri recentImages
	if _, ok := ri.get("img"); ok {
		t.Fatal("an image no prepare found: served")
	}
	now := time.Now()
	ri.put("img", "sha256:new", now)
	ri.put("img", "sha256:old", now.Add(-time.Millisecond)) // asked earlier, answered later
	if id, ok := ri.get("img"); !ok || id != "sha256:new" {
		t.Errorf("get = %q, %v; want the later question's sha256:new", id, ok)
	}
	ri.put("other", "sha256:gone", now.Add(-recentImageFor))
	if _, ok := ri.get("other"); ok {
		t.Errorf("a finding older than %v: served", recentImageFor)
	}
}
