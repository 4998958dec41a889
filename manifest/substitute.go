package manifest

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	envsubst "github.com/a8m/envsubst/parse"

	"github.com/airlock-dev/airlock/manifest/specrules"
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

// substituter expands ${VAR} references (design.md §5).
type substituter struct {
	getenv func(string) (string, bool)
	vault  Lookup
	// fromVault collects the names whose vault values expand used, in order.
	fromVault []string
	// used collects the values expand put in (each variable's own, with its
	// name and source), in order: the pieces of a value that mixes them with
	// literal text, which are masked on their own too (Resolved.Redacted).
	used []piece
	// secretEnv: getenv's values are secrets (Loader.SecretEnv).
	secretEnv bool
	// refs holds, while [env] is substituted, the values of daemons.*.env and
	// services.*.env after their own substitution, by key path: a ${…} that
	// names one (${daemons.db.env.USER}) takes it.
	refs map[string]refValue
}

// refValue is a substituted value another key may name: the value, where it
// came from, the vault variables it used and the values it was made of.
type refValue struct {
	val    string
	src    Source
	vault  []string
	pieces []piece
}

// piece is one variable's value inside a substituted value.
type piece struct {
	name string
	val  string
	src  Source
}

// isRef reports whether the name of a ${…} token is the key path of a variable
// of a daemon or a service rather than a host variable.
func isRef(name string) bool {
	return (strings.HasPrefix(name, "daemons.") || strings.HasPrefix(name, "services.")) && strings.Contains(name, ".env.")
}

// maxNesting bounds how deep ${VAR:-default} expressions may nest in a default.
const maxNesting = 8

// expand resolves tmpl. Forms: ${VAR}, ${VAR:default}, ${VAR:-default}, and $$ for
// a literal $. A $ followed by anything else is kept as it is. A default is
// itself expanded, when it is used, so defaults nest: ${A:-${B:-x}}. A template
// with no $ never calls a lookup. Error messages name variables, never values.
//
// The work is split: this scanner finds each ${…} token (its closing brace,
// nested ones skipped), checks its name and looks that name up, lazily; the
// envsubst parser decides, by the shell's semantics of the token's operator,
// whether the token takes the variable's value or its default (see choose);
// a default that is used is expanded here in turn.
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
		name, op, def := splitExpr(expr)
		var (
			val   string
			from  Source
			found bool
			ref   refValue
		)
		switch {
		case isRef(name):
			if s.refs == nil {
				return "", Literal, fmt.Errorf("${%s}: another key's value can be named in [env] only", name)
			}
			ref, found = s.refs[name]
			if !found && op == "" {
				return "", Literal, fmt.Errorf("${%s}: no layer sets %s", name, name)
			}
			val, from = ref.val, ref.src
		case !specrules.ValidEnvName(name):
			return "", Literal, fmt.Errorf("invalid variable name %q in ${%s}", name, expr)
		default:
			var err error
			if val, from, err = s.lookup(name); err != nil {
				return "", Literal, err
			}
			found = from != Literal
		}
		useDefault, err := choose(name, op, found, val)
		if err != nil {
			return "", Literal, err
		}
		if useDefault {
			// The default: expanded in turn, and only now, so that the
			// variables it names are looked up only when it is used.
			val, from, err = s.expand(def)
			if err != nil {
				return "", Literal, err
			}
		} else if from != Literal {
			s.used = append(s.used, piece{name: name, val: val, src: from})
			s.used = append(s.used, ref.pieces...)
		}
		if !useDefault && from == Vault {
			names := []string{name}
			if ref.src == Vault {
				names = ref.vault
			}
			for _, n := range names {
				if !slices.Contains(s.fromVault, n) {
					s.fromVault = append(s.fromVault, n)
				}
			}
		}
		b.WriteString(val)
		src = max(src, from)
	}
	return b.String(), src, nil
}

// splitExpr splits the inside of a ${…} token into the variable's name, the
// operator in envsubst's (the shell's) terms and the default. airlock's
// ${VAR:default} is the shell's ${VAR-default} (the default only when VAR is
// set nowhere); ${VAR:-default} is the shell's and compose's (the default also
// when VAR is empty); ${VAR} has no operator.
func splitExpr(expr string) (name, op, def string) {
	name, def, hasDef := strings.Cut(expr, ":")
	switch {
	case !hasDef:
		return name, "", ""
	case strings.HasPrefix(def, "-"):
		return name, ":-", def[1:]
	}
	return name, "-", def
}

// Marks stand for the value and the default in the expression choose gives
// envsubst, so it never sees either.
const (
	valueMark   = "v"
	defaultMark = "d"
)

// choose reports whether the token ${name<op>default} takes its default,
// given whether name was found (in the host environment or the vault) and its
// value. envsubst's parser decides, on the expression ${V<op>d} with only V
// in its environment (set to a mark, or empty when the value is): what it
// gives is the value's mark (or nothing), or the default's. A token without a
// default whose variable is set nowhere is an error, naming the variable.
func choose(name, op string, found bool, val string) (bool, error) {
	var env []string
	if found {
		mark := ""
		if val != "" {
			mark = valueMark
		}
		env = []string{"V=" + mark}
	}
	expr := "${V}"
	if op != "" {
		expr = "${V" + op + defaultMark + "}"
	}
	out, err := envsubst.New(name, env, envsubst.NoUnset).Parse(expr)
	switch {
	case err != nil && !found && op == "":
		return false, fmt.Errorf("%s is not set and not in the vault", name)
	case err != nil:
		return false, fmt.Errorf("cannot substitute ${%s}: %v", name, err)
	case out == defaultMark:
		return true, nil
	case out == valueMark || out == "":
		return false, nil
	}
	return false, fmt.Errorf("cannot substitute ${%s}: unexpected %q from envsubst", name, out)
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
