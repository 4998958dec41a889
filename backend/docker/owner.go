package docker

import "github.com/airlock-dev/airlock/backend"

// ownerKey is the control daemon's instance key (Runtime.Owner), put on every
// object made and required of every object listed or removed ("" for none:
// tests, tools).
type ownerKey string

// owns reports whether an object of a sandbox this runtime was asked about is its
// daemon's: it carries the daemon's owner key, or no owner at all (made before
// owners were recorded; the caller knows the sandbox from its own store).
func (o ownerKey) owns(labels map[string]string) bool {
	l, ok := labels[backend.LabelOwner]
	return o == "" || !ok || l == string(o)
}

// helperLabels are the labels of a short-lived helper container.
func (o ownerKey) helperLabels() map[string]string {
	return o.label(map[string]string{backend.LabelRole: "helper"})
}

// label adds the daemon's owner key to the labels of an object it makes
// (nothing without one) and returns them.
func (o ownerKey) label(l map[string]string) map[string]string {
	if o != "" {
		l[backend.LabelOwner] = string(o)
	}
	return l
}
