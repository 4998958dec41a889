package userconfig

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Toleration is one entry of kubernetes.tolerations: a Pod toleration as
// Kubernetes spells it.
type Toleration struct {
	Key      string `json:"key,omitempty"`
	Operator string `json:"operator,omitempty"` // Equal (the default) or Exists
	Value    string `json:"value,omitempty"`
	Effect   string `json:"effect,omitempty"` // NoSchedule, PreferNoSchedule, NoExecute or "" (all)
	// Seconds is toleration_seconds: with NoExecute, how long the Pod stays
	// on a node tainted so (nil: for ever).
	Seconds *int64 `json:"toleration_seconds,omitempty"`
}

// Resources is [kubernetes.resources]: the sandbox container's default
// requests and limits by resource name (cpu, memory, ephemeral-storage), as
// Kubernetes quantities. sandbox.cpus and sandbox.memory take the place of the
// limits they name.
type Resources struct {
	Requests map[string]string `json:"requests,omitempty"`
	Limits   map[string]string `json:"limits,omitempty"`
}

// kubernetesPodFile is the part of [kubernetes] that shapes every Pod.
type kubernetesPodFile struct {
	NodeSelector map[string]string `toml:"node_selector"`
	Tolerations  []struct {
		Key      *string `toml:"key"`
		Operator *string `toml:"operator"`
		Value    *string `toml:"value"`
		Effect   *string `toml:"effect"`
		Seconds  *int64  `toml:"toleration_seconds"`
	} `toml:"tolerations"`
	RuntimeClassName *string `toml:"runtime_class_name"`
	ServiceAccount   *string `toml:"service_account"`
	Resources        *struct {
		Requests map[string]string `toml:"requests"`
		Limits   map[string]string `toml:"limits"`
	} `toml:"resources"`
}

var (
	// A label key's name part, a label value (non-empty), and a DNS subdomain
	// (a label key's prefix, a RuntimeClass or ServiceAccount name).
	labelNameRE    = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	dnsSubdomainRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	// A Kubernetes quantity: a number and an optional suffix (binary Ki…Ei,
	// decimal m, k, M…E, or an exponent).
	quantityRE = regexp.MustCompile(`^([0-9]+(\.[0-9]*)?|\.[0-9]+)([KMGTPE]i|[mkMGTPE]|[eE][-+]?[0-9]+)?$`)
)

// resourceNames are the resources kubernetes.resources may name.
var resourceNames = []string{"cpu", "memory", "ephemeral-storage"}

// parseKubernetesPod validates the Pod-shaping keys of [kubernetes] into k;
// add reports a problem under its key.
func parseKubernetesPod(f *kubernetesPodFile, k *Kubernetes, add func(key, msg string)) {
	if f.NodeSelector != nil {
		ok := true
		for _, name := range slices.Sorted(maps.Keys(f.NodeSelector)) {
			if err := checkLabelKey(name); err != nil {
				add("kubernetes.node_selector", fmt.Sprintf("label %q: %v", name, err))
				ok = false
			} else if v := f.NodeSelector[name]; v != "" && (len(v) > 63 || !labelNameRE.MatchString(v)) {
				add("kubernetes.node_selector", fmt.Sprintf("label %q: invalid value %q (at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit)", name, v))
				ok = false
			}
		}
		if ok {
			k.NodeSelector = f.NodeSelector
		}
	}
	for i, t := range f.Tolerations {
		at := fmt.Sprintf("kubernetes.tolerations[%d]", i)
		tol := Toleration{Key: deref(t.Key), Operator: deref(t.Operator), Value: deref(t.Value), Effect: deref(t.Effect), Seconds: t.Seconds}
		if msg := checkToleration(tol); msg != "" {
			add("kubernetes.tolerations", at+": "+msg)
			continue
		}
		k.Tolerations = append(k.Tolerations, tol)
	}
	objectName := func(key, kind string, v *string, dst *string) {
		switch {
		case v == nil:
		case *v != "" && (len(*v) > 253 || !dnsSubdomainRE.MatchString(*v)):
			add(key, fmt.Sprintf("invalid %s name %q (lower-case letters, digits, '-' and '.', at most 253)", kind, *v))
		default:
			*dst = *v
		}
	}
	objectName("kubernetes.runtime_class_name", "RuntimeClass", f.RuntimeClassName, &k.RuntimeClassName)
	objectName("kubernetes.service_account", "ServiceAccount", f.ServiceAccount, &k.ServiceAccount)
	if r := f.Resources; r != nil {
		ok := checkQuantities("kubernetes.resources.requests", r.Requests, add)
		ok = checkQuantities("kubernetes.resources.limits", r.Limits, add) && ok
		for _, name := range slices.Sorted(maps.Keys(r.Requests)) {
			if l, has := r.Limits[name]; ok && has && quantityValue(r.Requests[name]) > quantityValue(l) {
				add("kubernetes.resources.requests", fmt.Sprintf("%s: the request %s is above its limit %s", name, r.Requests[name], l))
				ok = false
			}
		}
		if ok {
			k.Resources = Resources{Requests: r.Requests, Limits: r.Limits}
		}
	}
}

func checkLabelKey(key string) error {
	prefix, name, hasPrefix := strings.Cut(key, "/")
	if !hasPrefix {
		prefix, name = "", key
	}
	if hasPrefix && (prefix == "" || len(prefix) > 253 || !dnsSubdomainRE.MatchString(prefix)) {
		return fmt.Errorf("invalid prefix %q (a DNS subdomain: lower-case letters, digits, '-' and '.')", prefix)
	}
	if name == "" || len(name) > 63 || !labelNameRE.MatchString(name) {
		return fmt.Errorf("invalid name %q (at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit)", name)
	}
	return nil
}

// checkToleration says what is wrong with t, as the API server would refuse it.
func checkToleration(t Toleration) string {
	if t.Key != "" {
		if err := checkLabelKey(t.Key); err != nil {
			return fmt.Sprintf("key %q: %v", t.Key, err)
		}
	}
	switch t.Operator {
	case "", "Equal":
		if t.Key == "" {
			return "operator Equal needs a key (operator = \"Exists\" without a key tolerates every taint)"
		}
		if t.Value != "" && (len(t.Value) > 63 || !labelNameRE.MatchString(t.Value)) {
			return fmt.Sprintf("invalid value %q (at most 63 letters, digits, '-', '_' and '.')", t.Value)
		}
	case "Exists":
		if t.Value != "" {
			return "operator Exists takes no value"
		}
	default:
		return fmt.Sprintf("unknown operator %q (want Equal or Exists)", t.Operator)
	}
	switch t.Effect {
	case "", "NoSchedule", "PreferNoSchedule", "NoExecute":
	default:
		return fmt.Sprintf("unknown effect %q (want NoSchedule, PreferNoSchedule, NoExecute, or none for all)", t.Effect)
	}
	if t.Seconds != nil {
		if t.Effect != "NoExecute" {
			return "toleration_seconds goes with effect = \"NoExecute\""
		}
		if *t.Seconds < 0 {
			return fmt.Sprintf("toleration_seconds must not be negative, got %d", *t.Seconds)
		}
	}
	return ""
}

// checkQuantities validates a requests or limits table; false when it has a
// problem (reported).
func checkQuantities(key string, m map[string]string, add func(key, msg string)) bool {
	ok := true
	for _, name := range slices.Sorted(maps.Keys(m)) {
		v := strings.TrimSpace(m[name])
		switch {
		case !slices.Contains(resourceNames, name):
			add(key, fmt.Sprintf("unknown resource %q (want %s)", name, strings.Join(resourceNames, ", ")))
			ok = false
		case !quantityRE.MatchString(v):
			add(key, fmt.Sprintf("%s: invalid quantity %q (e.g. \"500m\" or \"2\" CPUs, \"512Mi\" or \"2Gi\" of memory)", name, m[name]))
			ok = false
		}
	}
	return ok
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// quantityValue is the value of a quantity quantityRE accepted, as a float
// (close enough to compare a request with its limit).
func quantityValue(q string) float64 {
	m := quantityRE.FindStringSubmatch(strings.TrimSpace(q))
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	suffix := m[3]
	switch {
	case suffix == "":
	case strings.HasSuffix(suffix, "i"):
		v *= math.Pow(1024, float64(strings.IndexByte("KMGTPE", suffix[0])+1))
	case suffix == "m":
		v /= 1000
	case suffix[0] == 'e' || suffix[0] == 'E':
		exp, _ := strconv.Atoi(suffix[1:])
		v *= math.Pow(10, float64(exp))
	default:
		v *= math.Pow(1000, float64(strings.IndexByte("kMGTPE", suffix[0])+1))
	}
	return v
}
