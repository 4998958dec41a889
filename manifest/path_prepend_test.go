package manifest_test

import (
	"slices"
	"testing"
)

// sandbox.path_prepend: directories in front of the PATH each process starts
// with in the sandbox (the image's), the way to extend the image's PATH that
// `PATH = "/x:${PATH}"` is not (${PATH} is the host's).

func TestPathPrepend(t *testing.T) {
	r := load(t, map[string]string{
		"p.toml":       "[sandbox]\npath_prepend = [\"/preset/bin\"]\n",
		"sandbox.toml": "presets = [\"./p.toml\"]\n" + img + "path_prepend = [\"/usr/local/go/bin\", \"/opt/${X}/bin\"]\n",
	})
	// An array: the higher layer's replaces the preset's; not substituted.
	if want := []string{"/usr/local/go/bin", "/opt/${X}/bin"}; !slices.Equal(r.Sandbox.PathPrepend, want) {
		t.Errorf("path_prepend = %q, want %q", r.Sandbox.PathPrepend, want)
	}
	if r := load(t, map[string]string{"sandbox.toml": img}); r.Sandbox.PathPrepend != nil {
		t.Errorf("path_prepend without a layer setting it = %q, want none", r.Sandbox.PathPrepend)
	}
	for line, want := range map[string]string{
		`path_prepend = ["bin"]`:          `sandbox.toml:3: sandbox.path_prepend: element 0: must be an absolute path, got "bin"`,
		`path_prepend = ["/a", "/b:/c"]`:  `sandbox.toml:3: sandbox.path_prepend: element 1: must not contain ':' (PATH's separator) or a NUL byte, got "/b:/c"`,
		`path_prepend = ["/a", ""]`:       `sandbox.toml:3: sandbox.path_prepend: element 1: must be an absolute path, got ""`,
		`path_prepend = "/usr/local/bin"`: `sandbox.toml:3: sandbox.path_prepend: wrong type: expected an array, got a string`,
	} {
		if got := loadErr(t, map[string]string{"sandbox.toml": img + line + "\n"}); got != want {
			t.Errorf("%s\n\tgot  %s\n\twant %s", line, got, want)
		}
	}
}
