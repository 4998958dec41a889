package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Rule is one allowed destination, parsed from an entry of sandbox.egress.allow:
//
//	host           exact host name or IP address ("proxy.example.org", "10.0.0.5", "::1")
//	*.domain       any name at any depth below domain, not domain itself
//	host:port      with an explicit port ("registry.internal:5000", "[::1]:443")
//
// Without a port a rule allows the default ports, 80 (HTTP) and 443 (CONNECT);
// with one it allows only that port, for both.
type Rule struct {
	// Host is the host name in lower case without a trailing dot, or the IP
	// address in canonical form (IPv6 without brackets). For a wildcard rule
	// it is the domain after "*.".
	Host string
	// Wildcard is true for "*.domain": Host's subdomains match, Host does not.
	Wildcard bool
	// Port is the only port allowed, or 0 for the default ports 80 and 443.
	Port int
}

// String returns the rule as an allow entry, in canonical form.
func (r Rule) String() string {
	h := r.Host
	if r.Wildcard {
		h = "*." + h
	}
	if r.Port == 0 {
		return h
	}
	return joinHostPort(h, r.Port)
}

// ParseRule parses one allow entry. Its error names the entry and says what is
// wrong with it.
func ParseRule(s string) (Rule, error) {
	r, err := parseRule(s)
	if err != nil {
		return Rule{}, fmt.Errorf("%q: %w", s, err)
	}
	return r, nil
}

// ParseRules parses allow entries in order and stops at the first bad one.
func ParseRules(entries []string) ([]Rule, error) {
	rules := make([]Rule, 0, len(entries))
	for _, e := range entries {
		r, err := ParseRule(e)
		if err != nil {
			return nil, err
		}
		rules = append(rules, r)
	}
	return rules, nil
}

func parseRule(s string) (Rule, error) {
	if s == "" {
		return Rule{}, errors.New("empty entry: give a host name, *.domain or host:port")
	}
	if strings.Contains(s, "://") {
		return Rule{}, errors.New(`a URL is not an entry: give only the host (and ":port"), as in "example.com" or "example.com:8080"`)
	}
	for _, c := range s {
		switch {
		case c == ' ' || c == '\t':
			return Rule{}, errors.New("spaces are not allowed in an entry")
		case c < 0x20 || c == 0x7f:
			return Rule{}, errors.New("control characters are not allowed in an entry")
		case c == '/':
			return Rule{}, errors.New(`paths are not allowed: an entry is a host, *.domain or host:port, without "/"`)
		case c > 0x7e:
			return Rule{}, errors.New("non-ASCII characters are not allowed: write an internationalised name in its xn-- (punycode) form")
		}
	}
	host, portText, hasPort, err := splitEntry(s)
	if err != nil {
		return Rule{}, err
	}
	var r Rule
	if hasPort {
		if r.Port, err = parsePort(portText); err != nil {
			return Rule{}, err
		}
	}
	if strings.HasPrefix(host, "*.") {
		r.Wildcard = true
		host = host[2:]
		if host == "" || host == "." {
			return Rule{}, errors.New(`a wildcard needs a domain after "*.", as in "*.example.com"`)
		}
	} else if strings.Contains(host, "*") {
		if host == "*" {
			return Rule{}, errors.New(`"*" alone would allow everything: list the destinations, or use "*.domain" for a domain's subdomains`)
		}
		return Rule{}, errors.New(`"*" is allowed only as the whole first label, as in "*.example.com"`)
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		if r.Wildcard {
			return Rule{}, errors.New(`a wildcard needs a domain name, not an IP address, after "*."`)
		}
		if addr.Zone() != "" {
			return Rule{}, errors.New("an IPv6 zone (%...) is not allowed")
		}
		r.Host = addr.Unmap().String()
		return r, nil
	}
	name, err := normalizeName(host)
	if err != nil {
		return Rule{}, err
	}
	r.Host = name
	return r, nil
}

// splitEntry splits an entry into host and port text. Bare IPv6 addresses
// ("::1") have no port; with one they need brackets.
func splitEntry(s string) (host, port string, hasPort bool, err error) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", "", false, errors.New(`missing "]" after an IPv6 address`)
		}
		host, rest := s[1:end], s[end+1:]
		if _, err := netip.ParseAddr(host); err != nil || !strings.Contains(host, ":") {
			return "", "", false, errors.New("brackets are only for IPv6 addresses, as in \"[::1]:443\"")
		}
		switch {
		case rest == "":
			return host, "", false, nil
		case strings.HasPrefix(rest, ":"):
			return host, rest[1:], true, nil
		default:
			return "", "", false, fmt.Errorf(`unexpected %q after "]"`, rest)
		}
	}
	switch strings.Count(s, ":") {
	case 0:
		return s, "", false, nil
	case 1:
		i := strings.IndexByte(s, ':')
		if i == 0 {
			return "", "", false, errors.New("missing host before the port")
		}
		return s[:i], s[i+1:], true, nil
	default:
		if a, err := netip.ParseAddr(s); err == nil && a.Is6() {
			return s, "", false, nil
		}
		return "", "", false, errors.New(`too many ":": write an IPv6 address with a port as "[::1]:443"`)
	}
}

func parsePort(s string) (int, error) {
	if s == "" {
		return 0, errors.New(`missing port after ":"`)
	}
	if len(s) > 5 || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("invalid port %q: use a number from 1 to 65535", s)
	}
	p, _ := strconv.Atoi(s)
	if p < 1 || p > 65535 {
		return 0, fmt.Errorf("invalid port %q: use a number from 1 to 65535", s)
	}
	return p, nil
}

// normalizeName checks a DNS host name and returns it in lower case without a
// trailing dot. Labels are 1 to 63 letters, digits, "-" or "_"; the last one
// must not start with a digit, so that a name is never read as an IP address
// in another notation ("10.1", "010.0.0.5").
func normalizeName(s string) (string, error) {
	s = strings.ToLower(strings.TrimSuffix(s, "."))
	if s == "" {
		return "", errors.New("missing host name")
	}
	if len(s) > 253 {
		return "", errors.New("host name longer than 253 characters")
	}
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if l == "" {
			return "", errors.New(`empty label in host name (".." or a leading ".")`)
		}
		if len(l) > 63 {
			return "", fmt.Errorf("label %q is longer than 63 characters", l)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("invalid character %q in host name: use letters, digits, \"-\", \"_\" and \".\"", c)
			}
		}
	}
	if last := labels[len(labels)-1]; last[0] >= '0' && last[0] <= '9' {
		return "", fmt.Errorf("%q is neither an IP address nor a host name (a name's last label does not start with a digit)", s)
	}
	return s, nil
}

// normalizeHost returns a destination host (a name, or an IP address with or
// without brackets) in the form rules hold, and whether it is an IP address.
func normalizeHost(host string) (string, bool, error) {
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
		if !strings.Contains(host, ":") {
			return "", false, errors.New("brackets around a host that is not an IPv6 address")
		}
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		if addr.Zone() != "" {
			return "", false, errors.New("IPv6 zones are not allowed")
		}
		return addr.Unmap().String(), true, nil
	}
	for i := 0; i < len(host); i++ {
		if c := host[i]; c <= ' ' || c >= 0x7f {
			return "", false, errors.New("host name with spaces, control or non-ASCII characters (use the xn-- form)")
		}
	}
	name, err := normalizeName(host)
	return name, false, err
}

// Allowed reports whether a rule allows host:port. Host names match case
// insensitively and without their trailing dot; an IP address (IPv6 with or
// without brackets) matches only rules that name that address. A rule without
// a port allows 80 and 443, the default ports of HTTP and CONNECT.
func Allowed(rules []Rule, host string, port int) bool {
	h, isIP, err := normalizeHost(host)
	if err != nil || port < 1 || port > 65535 {
		return false
	}
	for _, r := range rules {
		if r.allowsPort(port) && r.matchesHost(h, isIP) {
			return true
		}
	}
	return false
}

// AllowedName reports whether a rule names host (a host name, not an IP
// address), on whatever port: the names the sandbox's resolver answers.
func AllowedName(rules []Rule, host string) bool {
	h, isIP, err := normalizeHost(host)
	if err != nil || isIP {
		return false
	}
	for _, r := range rules {
		if r.matchesHost(h, false) {
			return true
		}
	}
	return false
}

// matchesHost reports whether the rule names h, a normalized host.
func (r Rule) matchesHost(h string, isIP bool) bool {
	if r.Wildcard {
		return !isIP && len(h) > len(r.Host)+1 && strings.HasSuffix(h, r.Host) && h[len(h)-len(r.Host)-1] == '.'
	}
	return h == r.Host
}

func (r Rule) allowsPort(port int) bool {
	if r.Port == 0 {
		return port == 80 || port == 443
	}
	return port == r.Port
}

func joinHostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + strconv.Itoa(port)
	}
	return host + ":" + strconv.Itoa(port)
}
