package proc

import (
	"bytes"
	"encoding/binary"
)

// parseProcArgs2 returns the argv of a macOS kern.procargs2 buffer: argc (an
// int32 in the host's byte order, little-endian on every Mac), the executable's
// path, NUL padding, then argc NUL-terminated arguments (the environment after
// them is not read). nil when the buffer is not of that shape. (Not behind a
// build tag, so that its test runs on Linux too.)
func parseProcArgs2(b []byte) []string {
	if len(b) < 4 {
		return nil
	}
	argc := int(int32(binary.LittleEndian.Uint32(b[:4])))
	rest := b[4:]
	i := bytes.IndexByte(rest, 0)
	if argc <= 0 || i < 0 {
		return nil
	}
	rest = rest[i:]
	for len(rest) > 0 && rest[0] == 0 {
		rest = rest[1:]
	}
	argv := make([]string, 0, argc)
	for len(argv) < argc {
		j := bytes.IndexByte(rest, 0)
		if j < 0 {
			return nil
		}
		argv = append(argv, string(rest[:j]))
		rest = rest[j+1:]
	}
	return argv
}
