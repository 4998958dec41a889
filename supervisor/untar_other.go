//go:build !linux

package supervisor

// oSearch: no open flag for search permission only here (see untar_linux.go).
const oSearch = 0
