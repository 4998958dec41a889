//go:build embedsupervisors

package supervisorbin

import _ "embed"

// Written by `make supervisors` (see the Makefile); not committed.
var (
	//go:embed gen/linux-amd64/airlock.gz
	linuxAMD64 []byte
	//go:embed gen/linux-arm64/airlock.gz
	linuxARM64 []byte
)

func init() {
	embedded = map[string][]byte{"amd64": linuxAMD64, "arm64": linuxARM64}
}
