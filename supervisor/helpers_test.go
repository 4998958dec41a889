package supervisor

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// runHelper is the test binary re-executed as a daemon or main command, so the
// tests need no nc or python. The mode comes from $SUPERVISOR_TEST_HELPER.
func runHelper(mode string, args []string) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "helper %s: "+format+"\n", append([]any{mode}, a...)...)
		return 1
	}
	switch mode {
	case "listen": // ADDR DELAY: listen on ADDR after DELAY, accept forever
		time.Sleep(mustDuration(args[1]))
		l, err := net.Listen("tcp", args[0])
		if err != nil {
			return fail("%v", err)
		}
		for {
			c, err := l.Accept()
			if err != nil {
				return fail("%v", err)
			}
			_ = c.Close()
		}
	case "http": // ADDR DELAY STATUS: serve STATUS on every path after DELAY
		time.Sleep(mustDuration(args[1]))
		code, _ := strconv.Atoi(args[2])
		err := http.ListenAndServe(args[0], http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if code >= 300 && code < 400 {
				w.Header().Set("Location", "/elsewhere")
			}
			w.WriteHeader(code)
		}))
		return fail("%v", err)
	case "loading": // ADDR DELAY: listen at once; answer each request line with
		// -LOADING until DELAY passed, then with +PONG (a redis loading its data)
		ready := time.Now().Add(mustDuration(args[1]))
		l, err := net.Listen("tcp", args[0])
		if err != nil {
			return fail("%v", err)
		}
		for {
			c, err := l.Accept()
			if err != nil {
				return fail("%v", err)
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64)
				if _, err := c.Read(buf); err != nil {
					return
				}
				reply := "+PONG\r\n"
				if time.Now().Before(ready) {
					reply = "-LOADING Redis is loading the dataset in memory\r\n"
				}
				_, _ = c.Write([]byte(reply))
			}()
		}
	case "ping": // ADDR: exit 0 when PING gets +PONG
		c, err := net.DialTimeout("tcp", args[0], time.Second)
		if err != nil {
			return fail("%v", err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			return fail("%v", err)
		}
		buf := make([]byte, 64)
		n, _ := c.Read(buf)
		if !strings.HasPrefix(string(buf[:n]), "+PONG") {
			return fail("PING got %q", buf[:n])
		}
		return 0
	case "dial": // ADDR: exit 0 when a connection opens
		c, err := net.DialTimeout("tcp", args[0], time.Second)
		if err != nil {
			return fail("%v", err)
		}
		_ = c.Close()
		return 0
	case "get": // URL: exit 0 on an answer below 400 (redirects not followed)
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := client.Get(args[0])
		if err != nil {
			return fail("%v", err)
		}
		resp.Body.Close()
		if resp.StatusCode >= 400 {
			return fail("status %d", resp.StatusCode)
		}
		return 0
	case "signals": // FILE: record the six forwarded signals, exit 0 once all came
		return helperSignals(args[0])
	case "orphans": // N: orphan N children and check the supervisor reaps them
		n, _ := strconv.Atoi(args[0])
		return helperOrphans(n)
	case "winch": // DIR: check the terminal foreground, wait for SIGWINCH
		return helperWinch(args[0])
	}
	return fail("unknown mode")
}

func mustDuration(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}

var forwardedNames = []string{"SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"}

func helperSignals(file string) int {
	ch := make(chan os.Signal, 16)
	signal.Notify(ch, unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2)
	if err := os.WriteFile(file+".armed", nil, 0o644); err != nil {
		return 1
	}
	seen := map[string]bool{}
	timeout := time.After(20 * time.Second)
	for len(seen) < len(forwardedNames) {
		select {
		case s := <-ch:
			name := unix.SignalName(s.(syscall.Signal))
			seen[name] = true
			f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
			if err != nil {
				return 1
			}
			fmt.Fprintln(f, name)
			f.Close()
		case <-timeout:
			return 3
		}
	}
	return 0
}

// procChildren lists the pids whose parent is ppid (zombies included).
func procChildren(ppid int) (all []int, zombies int) {
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		st, pp, ok := parseStat(string(b))
		if !ok || pp != ppid {
			continue
		}
		pid, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(p, "/proc/"), "/stat"))
		all = append(all, pid)
		if st == "Z" {
			zombies++
		}
	}
	return all, zombies
}

func helperOrphans(n int) int {
	sup := os.Getppid()
	dir, err := os.MkdirTemp("", "orphans-")
	if err != nil {
		return 1
	}
	defer os.RemoveAll(dir)
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "orphans:", err)
		return 1
	}
	// Each ( … &) subshell exits at once, so its cat is orphaned and
	// reparented to the nearest subreaper: the supervisor. The cats block on
	// the fifo until this helper opens it for writing.
	script := fmt.Sprintf("i=0; while [ $i -lt %d ]; do (cat %q > /dev/null &); i=$((i+1)); done", n, fifo)
	if err := exec.Command("/bin/sh", "-c", script).Run(); err != nil {
		fmt.Fprintln(os.Stderr, "orphans:", err)
		return 1
	}
	others := func() (int, int) {
		all, z := procChildren(sup)
		count := 0
		for _, p := range all {
			if p != os.Getpid() {
				count++
			}
		}
		return count, z
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, _ := others()
		if c >= n {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "orphans: only %d of %d reparented to the supervisor\n", c, n)
			return 1
		}
		time.Sleep(5 * time.Millisecond)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		// Release every cat that has the fifo open (or is opening it).
		if f, err := os.OpenFile(fifo, os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		c, z := others()
		if c == 0 {
			fmt.Printf("orphans: %d reparented, all reaped\n", n)
			return 0
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "orphans: %d children left (%d zombies)\n", c, z)
			return 1
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func helperWinch(dir string) int {
	pg, err := unix.IoctlGetInt(0, unix.TIOCGPGRP)
	if err != nil || pg != unix.Getpgrp() {
		fmt.Fprintf(os.Stderr, "winch: not in the foreground: tty pgrp %d, mine %d, %v\n", pg, unix.Getpgrp(), err)
		return 5
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, unix.SIGWINCH)
	if err := os.WriteFile(filepath.Join(dir, "armed"), nil, 0o644); err != nil {
		return 1
	}
	select {
	case <-ch:
		return 0
	case <-time.After(20 * time.Second):
		return 4
	}
}
