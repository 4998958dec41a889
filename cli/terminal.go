package cli

import (
	"context"
	"os"
	"os/signal"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// rawTerminal puts stdin in raw mode; the returned function restores it and is
// safe to call more than once.
func rawTerminal(stdin any) func() {
	f, ok := stdin.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return func() {}
	}
	state, err := term.MakeRaw(int(f.Fd()))
	if err != nil {
		return func() {}
	}
	restored := false
	return func() {
		if !restored {
			restored = true
			_ = term.Restore(int(f.Fd()), state)
		}
	}
}

// followResize calls resize with the terminal size now and on every SIGWINCH
// until ctx ends.
func followResize(ctx context.Context, out any, resize func(h, w uint)) {
	followResizeFrom(ctx, out, true, resize)
}

// terminalSize is the size of out when it is a terminal (0, 0 otherwise).
func terminalSize(out any) (height, width uint) {
	if f, ok := out.(*os.File); ok {
		if w, h, err := term.GetSize(int(f.Fd())); err == nil && w > 0 && h > 0 {
			return uint(h), uint(w)
		}
	}
	return 0, 0
}

// followResizeFrom is followResize, sending the current size first only when
// now.
func followResizeFrom(ctx context.Context, out any, now bool, resize func(h, w uint)) {
	f, ok := out.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return
	}
	send := func() {
		if w, h, err := term.GetSize(int(f.Fd())); err == nil && w > 0 && h > 0 {
			resize(uint(h), uint(w))
		}
	}
	if now {
		send()
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, unix.SIGWINCH)
	go func() {
		defer signal.Stop(ch)
		for {
			select {
			case <-ctx.Done():
				return
			case <-ch:
				send()
			}
		}
	}()
}
