package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/airlock-dev/airlock/backend"
)

// Names of the objects inside a sandbox's Pod.
const (
	// MainContainer runs the supervisor as PID 1, and under it the main command.
	MainContainer = "sandbox"
	// InstallContainer copies the supervisor binary into the Pod (the first
	// init container).
	InstallContainer = "airlock-install"
	// KeeperContainer idles beside the primary of a run whose files are read
	// after it ended (run --output, --keep).
	KeeperContainer = "airlock-keeper"
	// PodPrefix starts the name of every sandbox Pod.
	PodPrefix = "airlock-"
	// ServicePrefix starts the container name of every service.
	ServicePrefix = "svc-"
)

// hashLen is how many hex digits of a name's SHA-256 a sanitised name ends with.
const hashLen = 8

// PodName is the name of the Pod of sandbox id: "airlock-<id>" when id is
// already a lowercase DNS label that fits, else the id lowercased, with every
// character outside [a-z0-9-] made '-', cut to fit 63 characters and followed
// by a short hash of the id, so that two ids never share a name ("MyBox" and
// "mybox" give "airlock-mybox-<hash>" and "airlock-mybox").
func PodName(id string) string { return dnsLabel(PodPrefix, id) }

// ContainerName is the name of the sidecar container of service name:
// "svc-<name>", sanitised like PodName.
func ContainerName(service string) string { return dnsLabel(ServicePrefix, service) }

// dnsLabel returns prefix+s when that is a DNS-1123 label (the names of Pods,
// containers and volumes), else prefix, s sanitised and cut, and a hash of s.
// prefix must be a lowercase label ending in '-' and shorter than 50 characters.
func dnsLabel(prefix, s string) string {
	room := validation.DNS1123LabelMaxLength - len(prefix)
	clean := strings.Trim(strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r + ('a' - 'A')
		}
		return '-'
	}, s), "-")
	if clean == s && clean != "" && len(clean) <= room {
		return prefix + clean
	}
	sum := sha256.Sum256([]byte(s))
	h := hex.EncodeToString(sum[:])[:hashLen]
	if keep := room - 1 - hashLen; len(clean) > keep {
		clean = strings.TrimRight(clean[:keep], "-")
	}
	if clean == "" {
		return prefix + h
	}
	return prefix + clean + "-" + h
}

// alwaysAnnotated are the keys of the sandbox's metadata that are read, never
// selected on: they go in annotations whatever their value.
var alwaysAnnotated = map[string]bool{
	backend.LabelProject:     true,
	backend.LabelCLIPid:      true,
	backend.LabelCLIStart:    true,
	backend.LabelStopTimeout: true,
}

// placeMeta splits the sandbox's metadata between labels and annotations: a
// value Kubernetes takes as a label value is a label (so it can be selected
// on), any other (a path, a long id) an annotation under the same key; keys in
// alwaysAnnotated are always annotations. A key that is not a valid Kubernetes
// key ("prefix/name") is an error.
func placeMeta(meta map[string]string) (labels, annotations map[string]string, err error) {
	labels, annotations = map[string]string{}, map[string]string{}
	for k, v := range meta {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, nil, configErr("cannot use the label %q on the kubernetes backend: %s", k, strings.Join(errs, "; "))
		}
		if !alwaysAnnotated[k] && len(validation.IsValidLabelValue(v)) == 0 {
			labels[k] = v
		} else {
			annotations[k] = v
		}
	}
	return labels, annotations, nil
}

// MetaValue returns the value of key on a sandbox's Pod: its label, else its
// annotation (where BuildPod puts values that cannot be labels).
func MetaValue(m *metav1.ObjectMeta, key string) (string, bool) {
	if v, ok := m.Labels[key]; ok {
		return v, true
	}
	v, ok := m.Annotations[key]
	return v, ok
}
