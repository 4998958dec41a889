package supervisor

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// TTYSizeEnv gives `supervise exec` the size its terminal is to have from the
// start, "COLSxROWS" (backend.ExecArgv sets it for a TTY exec asked with a
// size). The Engine sets an exec's size only once its process started (a
// resize after the start, or the start's console size on API 1.42 and later,
// which Engine 20.10 lacks): a command that reads its size at once would see
// none. The variable is taken out of the command's environment (an older
// supervisor leaves it there, harmless).
const TTYSizeEnv = "AIRLOCK_TTY_SIZE"

// TTYSize is the value of TTYSizeEnv for a size.
func TTYSize(cols, rows uint) string { return fmt.Sprintf("%dx%d", cols, rows) }

// takeTTYSize removes TTYSizeEnv from env and, when stdin is a terminal that
// has no size yet (a resize that came first wins), gives it the size asked.
func takeTTYSize(env []string) []string {
	out := env[:0:0]
	size := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, TTYSizeEnv+"="); ok {
			size = v
			continue
		}
		out = append(out, kv)
	}
	if size == "" {
		return out
	}
	c, r, ok := strings.Cut(size, "x")
	cols, err1 := strconv.ParseUint(c, 10, 16)
	rows, err2 := strconv.ParseUint(r, 10, 16)
	if !ok || err1 != nil || err2 != nil || cols == 0 || rows == 0 {
		return out
	}
	setTTYSizeIfNone(os.Stdin, uint16(cols), uint16(rows))
	return out
}
