package manifest

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/distribution/reference"
)

// imageIDRE matches an image ID as the Engine takes it in place of a name:
// sha256:<64 hex>, or hex alone.
var imageIDRE = regexp.MustCompile(`^(sha256:)?[a-f0-9]{12,64}$`)

// imageVarRE finds the variables a template names: ${NAME…}.
var imageVarRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)`)

// rawImages are the image references of m as written, before substitution,
// by key path.
func rawImages(m *Manifest) map[string]string {
	out := map[string]string{KeyPath("sandbox", "image"): m.Sandbox.Image}
	for name, s := range m.Services {
		out[KeyPath("services", name, "image")] = s.Image
	}
	return out
}

// checkImages parses every image reference of m (substituted) with the
// reference grammar the Engine uses, so that ":latest" or "Bad Image" is a
// config error at validate naming the key, not a failure of the pull. raw
// holds the references as written: a variable they name that is empty or
// unset is said (${IMAGE}:latest with IMAGE unset became ":latest").
func checkImages(m *Manifest, raw map[string]string, origins map[string]origin, getenv func(string) (string, bool)) Errors {
	refs := map[string]string{}
	if m.Sandbox.Image != "" {
		refs[KeyPath("sandbox", "image")] = m.Sandbox.Image
	}
	for name, s := range m.Services {
		if s.Enabled {
			refs[KeyPath("services", name, "image")] = s.Image
		}
	}
	var errs Errors
	for _, key := range slices.Sorted(maps.Keys(refs)) {
		img := refs[key]
		if imageIDRE.MatchString(img) {
			continue
		}
		if _, err := reference.ParseNormalizedNamed(img); err != nil {
			msg := fmt.Sprintf("%q is not an image reference (%v)", img, err)
			if written := raw[key]; written != img {
				var empty []string
				for _, v := range imageVarRE.FindAllStringSubmatch(written, -1) {
					if val, ok := getenv(v[1]); !ok || val == "" {
						empty = append(empty, "${"+v[1]+"}")
					}
				}
				msg = fmt.Sprintf("%q (written %q) is not an image reference (%v)", img, written, err)
				if len(empty) > 0 {
					msg += ": " + strings.Join(empty, ", ") + " is empty or not set"
				}
			}
			if strings.Contains(img, "${") && key != KeyPath("sandbox", "image") {
				msg += "; ${VAR} is not substituted in a service's image"
			}
			errs = append(errs, locate(origins, strings.Split(key, "."), msg))
		}
	}
	return errs
}
