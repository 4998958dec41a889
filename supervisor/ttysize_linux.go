package supervisor

import (
	"os"

	"golang.org/x/sys/unix"
)

// setTTYSizeIfNone gives the terminal f its size when it has none (0 × 0).
func setTTYSizeIfNone(f *os.File, cols, rows uint16) {
	fd := int(f.Fd())
	ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ)
	if err != nil || ws.Row != 0 || ws.Col != 0 {
		return // not a terminal, or sized already
	}
	_ = unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
}
