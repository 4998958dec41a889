package secrets

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ValidName reports whether name follows the vault's rule: ^[A-Z_][A-Z0-9_]*$.
func ValidName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '_' || (c >= 'A' && c <= 'Z') || (i > 0 && c >= '0' && c <= '9') {
			continue
		}
		return false
	}
	return true
}

// ErrEmptyValue is returned when a secret's value is empty.
var ErrEmptyValue = errors.New("empty value refused: a secret needs a value")

// checkName returns an error naming name when it breaks the rule. Names are
// not secret, so the error may quote them.
func checkName(name string) error {
	if !ValidName(name) {
		return fmt.Errorf("invalid secret name %q: names are upper case letters, digits and _, not starting with a digit ([A-Z_][A-Z0-9_]*)", name)
	}
	return nil
}

// TrimNewline removes exactly one trailing line ending ("\n" or "\r\n") from
// a value read from standard input or a prompt.
func TrimNewline(s string) string {
	if strings.HasSuffix(s, "\r\n") {
		return s[:len(s)-2]
	}
	return strings.TrimSuffix(s, "\n")
}

// Preview shows a value without revealing it: "****", plus its last 2
// characters when it is at least 8 characters long, or its last 4 when it is
// at least 16 long.
func Preview(value string) string {
	n := utf8.RuneCountInString(value)
	keep := 0
	switch {
	case n >= 16:
		keep = 4
	case n >= 8:
		keep = 2
	}
	if keep == 0 {
		return "****"
	}
	r := []rune(value)
	return "****" + string(r[len(r)-keep:])
}
