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
