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

// expand resolves tmpl. Forms: ${VAR}, ${VAR:default}, ${VAR:-default}, and $$ for
// a literal $. A $ followed by anything else is kept as it is. A template with no $
// never calls a lookup. Error messages name variables, never values.
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
		end := strings.IndexByte(tmpl[i+2:], '}')
		if end < 0 {
			return "", Literal, fmt.Errorf("unterminated ${ at offset %d", i)
		}
		expr := tmpl[i+2 : i+2+end]
		i += 2 + end
		name, def, hasDef := expr, "", false
		if j := strings.IndexByte(expr, ':'); j >= 0 {
			name, def, hasDef = expr[:j], strings.TrimPrefix(expr[j+1:], "-"), true
		}
		if !validVarName(name) {
			return "", Literal, fmt.Errorf("invalid variable name %q in ${%s}", name, expr)
		}
		val, from, err := s.lookup(name)
		if err != nil {
			return "", Literal, err
		}
		switch {
		case from != Literal:
			b.WriteString(val)
			if from > src {
				src = from
			}
		case hasDef:
			b.WriteString(def)
		default:
			return "", Literal, fmt.Errorf("%s is not set and not in the vault", name)
		}
	}
	return b.String(), src, nil
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
