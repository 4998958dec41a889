package manifest

import (
	"fmt"
	"slices"
	"strings"
)

// Capabilities are the Linux capability names sandbox.cap_add and
// sandbox.cap_drop accept, without the CAP_ prefix, in the kernel's order
// (capabilities(7); CAP_CHECKPOINT_RESTORE, 40, is the last one Linux defines).
var Capabilities = []string{
	"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
	"SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW",
	"IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT",
	"SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD",
	"LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG",
	"WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE",
}

// AllCapabilities is the name that stands for every capability, as in Docker.
const AllCapabilities = "ALL"

// NormalizeCapability returns the Engine's spelling of a capability name as
// Docker takes it (with or without CAP_, any case): "CAP_NET_ADMIN", or "ALL".
func NormalizeCapability(name string) (string, error) {
	n := strings.ToUpper(strings.TrimSpace(name))
	if n == AllCapabilities {
		return n, nil
	}
	n = strings.TrimPrefix(n, "CAP_")
	if n == "" || !slices.Contains(Capabilities, n) {
		return "", fmt.Errorf("unknown capability %q (use a Linux capability name as Docker takes it, with or without CAP_, or ALL; known names: %s)", name, strings.Join(Capabilities, ", "))
	}
	return "CAP_" + n, nil
}

// NormalizeCapabilities normalizes a list of names (see NormalizeCapability),
// leaving out repeats.
func NormalizeCapabilities(names []string) ([]string, error) {
	var out []string
	for _, name := range names {
		n, err := NormalizeCapability(name)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// PowerfulCapabilities reports the capabilities of cap_add that come close to
// privileged (SYS_ADMIN, ALL), normalized, for a warning.
func PowerfulCapabilities(s *Sandbox) []string { return PowerfulOf(s.CapAdd) }

// PowerfulOf is PowerfulCapabilities of any cap_add list (a service's).
func PowerfulOf(capAdd []string) []string {
	var out []string
	for _, name := range capAdd {
		n, err := NormalizeCapability(name)
		if err == nil && (n == AllCapabilities || n == "CAP_SYS_ADMIN") && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}
