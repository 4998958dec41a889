package ids

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	good := []string{"abcd", "a-_9", "AB_cd-12", strings.Repeat("a", 200), New()}
	bad := []string{"", "abc", "-abc", "abc-", "_abc", "abc_", "ab cd", "ab/cd", "ab.cd", "ab:cd",
		"日本語ab", strings.Repeat("a", 201), "abcd\n", "../../etc"}
	for _, id := range good {
		if err := Validate(id); err != nil {
			t.Errorf("Validate(%q) = %v", id, err)
		}
	}
	for _, id := range bad {
		err := Validate(id)
		if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), "cannot use the id ") {
			t.Errorf("Validate(%q) = %v, want a \"cannot use the id\" error wrapping ErrInvalid", id, err)
		}
	}
}

func TestNew(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := New()
		if !re.MatchString(id) || Validate(id) != nil {
			t.Fatalf("New() = %q is not a UUIDv4", id)
		}
		if seen[id] {
			t.Fatalf("New() repeated %q", id)
		}
		seen[id] = true
	}
}

// TestValidAgreesWithPattern: the hand-written check accepts exactly what
// Pattern, compiled, matches, on every short string over an alphabet of the
// classes that matter and on lengths around the bounds.
func TestValidAgreesWithPattern(t *testing.T) {
	re := regexp.MustCompile(Pattern)
	alphabet := []string{"a", "Z", "7", "-", "_", ".", " ", "é"}
	var walk func(s string, n int)
	walk = func(s string, n int) {
		if got, want := Valid(s), re.MatchString(s); got != want {
			t.Errorf("Valid(%q) = %v, Pattern matches: %v", s, got, want)
		}
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			walk(s+c, n-1)
		}
	}
	walk("", 5)
	for _, n := range []int{198, 199, 200, 201, 202} {
		for _, s := range []string{strings.Repeat("a", n), "a" + strings.Repeat("-", n-2) + "b", "a" + strings.Repeat("x", n-2) + "_"} {
			if got, want := Valid(s), re.MatchString(s); got != want {
				t.Errorf("Valid(%d chars %q…) = %v, Pattern matches: %v", n, s[:8], got, want)
			}
		}
	}
}
