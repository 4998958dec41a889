//go:build linux

package supervisor

import "golang.org/x/sys/unix"

// oSearch opens a folder only to look up names in it, which needs no read
// permission (a folder of mode 0711 on the way to an entry).
const oSearch = unix.O_PATH
