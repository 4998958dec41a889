package manifest

import (
	"errors"
	"fmt"
	"strings"
)

// Lookup finds a name outside the host environment: the vault implements it.
// It is asked only for names the host environment lacks.
type Lookup interface {
	Lookup(name string) (value string, ok bool, err error)
}

// ErrVaultDisabled is what a Lookup's error wraps when the user disabled the vault.
var ErrVaultDisabled = errors.New("the vault is disabled")

// Source tells where a value came from.
type Source int

const (
	// Literal values are written in a layer as they are.
	Literal Source = iota
	// Host values contain at least one ${VAR} taken from the host environment.
	Host
	// Vault values contain at least one ${VAR} taken from the vault: they are secret.
	Vault
)

func (s Source) String() string {
	switch s {
	case Host:
		return "host"
	case Vault:
		return "vault"
	}
	return "literal"
}

// substituter expands ${VAR} references (DESIGN §5).
type substituter struct {
	getenv func(string) (string, bool)
	vault  Lookup
}

// maxNesting bounds how deep ${VAR:-default} expressions may nest in a default.
const maxNesting = 8

// expand resolves tmpl. Forms: ${VAR}, ${VAR:default}, ${VAR:-default}, and $$ for
// a literal $. A $ followed by anything else is kept as it is. A default is
// itself expanded, when it is used, so defaults nest: ${A:-${B:-x}}. A template
// with no $ never calls a lookup. Error messages name variables, never values.
func (s *substituter) expand(tmpl string) (string, Source, error) {
	if !strings.Contains(tmpl, "$") {
		return tmpl, Literal, nil
	}
	var b strings.Builder
	src := Literal
	for i := 0; i < len(tmpl); i++ {
		c := tmpl[i]
		if c != '$' || i+1 >= len(tmpl) {
			b.WriteByte(c)
			continue
		}
		switch tmpl[i+1] {
		case '$':
			b.WriteByte('$')
			i++
			continue
		case '{':
		default:
			b.WriteByte(c)
			continue
		}
		end, depth := closingBrace(tmpl, i+2)
		if end < 0 {
			return "", Literal, fmt.Errorf("unterminated ${ at offset %d", i)
		}
		if depth > maxNesting {
			return "", Literal, fmt.Errorf("${ at offset %d nests defaults more than %d deep", i, maxNesting)
		}
		expr := tmpl[i+2 : end]
		i = end
		name, def, hasDef, emptyToo := expr, "", false, false
		if j := strings.IndexByte(expr, ':'); j >= 0 {
			name, def, hasDef = expr[:j], expr[j+1:], true
			// ${VAR:-default} (the shell's and compose's form) also when VAR is
			// empty; ${VAR:default} (airlock's) only when it is set nowhere.
			if strings.HasPrefix(def, "-") {
				def, emptyToo = def[1:], true
			}
		}
		if !validVarName(name) {
			return "", Literal, fmt.Errorf("invalid variable name %q in ${%s}", name, expr)
		}
		val, from, err := s.lookup(name)
		if err != nil {
			return "", Literal, err
		}
		if hasDef && (from == Literal || (emptyToo && val == "")) {
			// The default: expanded in turn, and only now, so that the
			// variables it names are looked up only when it is used.
			val, from, err = s.expand(def)
			if err != nil {
				return "", Literal, err
			}
		} else if from == Literal {
			return "", Literal, fmt.Errorf("%s is not set and not in the vault", name)
		}
		b.WriteString(val)
		src = max(src, from)
	}
	return b.String(), src, nil
}

// closingBrace returns the index of the } that closes the ${ whose content
// starts at start (a ${ inside opens a nested expression, $$ is skipped), or -1,
// and how deep expressions nest in it (1 when none is nested).
func closingBrace(tmpl string, start int) (end, depth int) {
	open, deepest := 1, 1
	for j := start; j < len(tmpl); j++ {
		switch tmpl[j] {
		case '$':
			if j+1 < len(tmpl) && (tmpl[j+1] == '{' || tmpl[j+1] == '$') {
				if tmpl[j+1] == '{' {
					open++
					deepest = max(deepest, open)
				}
				j++
			}
		case '}':
			open--
			if open == 0 {
				return j, deepest
			}
		}
	}
	return -1, deepest
}

// lookup returns the value of name and where it came from; Literal means not found.
func (s *substituter) lookup(name string) (string, Source, error) {
	if v, ok := s.getenv(name); ok {
		return v, Host, nil
	}
	if s.vault == nil {
		return "", Literal, nil
	}
	v, ok, err := s.vault.Lookup(name)
	if err != nil {
		if errors.Is(err, ErrVaultDisabled) {
			return "", Literal, fmt.Errorf("%s is not set and the vault is disabled", name)
		}
		return "", Literal, fmt.Errorf("%s is not set and the vault cannot be read: %w", name, err)
	}
	if !ok {
		return "", Literal, nil
	}
	return v, Vault, nil
}

func validVarName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (i > 0 && c >= '0' && c <= '9') {
			continue
		}
		return false
	}
	return true
}
