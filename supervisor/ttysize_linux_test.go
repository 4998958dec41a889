package supervisor

import (
	"slices"
	"testing"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// TestTTYSizeIfNone: a terminal without a size gets the one asked; one sized
// already (a resize that came first) keeps its own; the variable never
// reaches the command's environment.
func TestTTYSizeIfNone(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	size := func() (uint16, uint16) {
		ws, err := unix.IoctlGetWinsize(int(tty.Fd()), unix.TIOCGWINSZ)
		if err != nil {
			t.Fatal(err)
		}
		return ws.Col, ws.Row
	}
	if c, r := size(); c != 0 || r != 0 {
		t.Skipf("a new pseudo-terminal has a size here: %dx%d", c, r)
	}
	setTTYSizeIfNone(tty, 111, 33)
	if c, r := size(); c != 111 || r != 33 {
		t.Errorf("after setTTYSizeIfNone(111, 33): %dx%d", c, r)
	}
	setTTYSizeIfNone(tty, 80, 24)
	if c, r := size(); c != 111 || r != 33 {
		t.Errorf("a sized terminal was resized: %dx%d, want 111x33 kept", c, r)
	}

	env := takeTTYSize([]string{"A=1", TTYSizeEnv + "=80x24", "B=2"})
	if !slices.Equal(env, []string{"A=1", "B=2"}) {
		t.Errorf("takeTTYSize left %q", env)
	}
	if TTYSize(80, 24) != "80x24" {
		t.Errorf("TTYSize(80, 24) = %q", TTYSize(80, 24))
	}
}
