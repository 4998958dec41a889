package control_test

// The TCP listener under a flood of connections (issue 39): whatever TCP
// clients do, the owner is served on the Unix socket.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/test/testenv"
)

// holdEnv makes the test binary a connection holder (holdConns) instead of
// running the tests.
const holdEnv = "AIRLOCK_TEST_HOLD_CONNS"

// holdConns, in a child started with holdEnv = "ADDR N FIRST SOURCES", opens N
// TCP connections to ADDR in parallel from the loopback addresses
// 127.0.0.FIRST … 127.0.0.(FIRST+SOURCES-1), sends nothing on them, prints
// "held K" (how many connected) and keeps them until its stdin ends.
func holdConns() bool {
	spec := os.Getenv(holdEnv)
	if spec == "" {
		return false
	}
	var addr string
	var n, first, sources int
	if _, err := fmt.Sscan(spec, &addr, &n, &first, &sources); err != nil {
		fmt.Println("bad spec:", err)
		os.Exit(2)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		next  atomic.Int64
		wg    sync.WaitGroup
	)
	for w := 0; w < 128; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				d := net.Dialer{
					Timeout:   2 * time.Second,
					LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(first+i%sources))},
					// The port is chosen at connect, for the 4-tuple: the
					// held connections do not use up the host's ephemeral ports.
					Control: func(_, _ string, c syscall.RawConn) error {
						return c.Control(func(fd uintptr) {
							_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
						})
					},
				}
				c, err := d.Dial("tcp", addr)
				if err != nil {
					continue
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	fmt.Printf("held %d\n", len(conns))
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, c := range conns {
		c.Close()
	}
	return true
}

// holder is a child process of uid 65534 holding connections.
type holder struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	held  int
}

// holdFrom starts a holder of n connections to addr from sources loopback
// addresses from 127.0.0.first, as uid 65534, and waits until it dialled them.
func holdFrom(t *testing.T, bin, addr string, n, first, sources int) *holder {
	t.Helper()
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = []string{holdEnv + "=" + fmt.Sprintf("%s %d %d %d", addr, n, first, sources), "PATH=/usr/bin:/bin"}
	if os.Getuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &holder{cmd: cmd, stdin: stdin}
	t.Cleanup(h.release)
	line, err := bufio.NewReader(out).ReadString('\n')
	if _, serr := fmt.Sscanf(line, "held %d", &h.held); err != nil || serr != nil {
		t.Fatalf("the connection holder: %q %v %v", line, err, serr)
	}
	return h
}

func (h *holder) release() {
	if h.stdin != nil {
		h.stdin.Close()
		h.stdin = nil
		_ = h.cmd.Wait()
	}
}

// holderBinary is the test binary, copied where uid 65534 can run it.
func holderBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "airlock-holder-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "holder")
	testenv.CopyFile(t, self, bin, 0o755)
	return bin
}

// openFDs is how many files process pid has open.
func openFDs(pid int) int {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents)
}

// fileLimit is the soft open-files limit of process pid.
func fileLimit(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(strings.TrimPrefix(line, "Max open files")); line != "" && strings.HasPrefix(line, "Max open files") && len(f) > 0 {
			n, err := strconv.Atoi(f[0])
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return n
		}
	}
	t.Fatalf("no open-files limit in /proc/%d/limits", pid)
	return 0
}

// TestTCPFloodSparesTheSocket: 25 000 connections held open against the TCP
// listener by another user (uid 65534, from ten loopback addresses; two
// processes, as one may not have so many files open) leave the owner's `ps`
// and `run` on the Unix socket working; a keep-alive connection that got its
// 401 is closed; one address flooding leaves room for another's token
// client.
func TestTCPFloodSparesTheSocket(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.writeManifest("[sandbox]\nimage = \"{{image}}\"\nnetwork = \"none\"\n")
	tokenFile := filepath.Join(e.home, "token")
	const token = "flood-token-8d1e"
	writeTokenFile(t, tokenFile, token, 0o600)
	port := freePort(t)
	d := e.startDaemon(binA, "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--token-file", tokenFile)
	waitTCP(t, port)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	bin := holderBinary(t)

	// A keep-alive connection that got its 401 is closed.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(conn, "GET /v1/health HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a request without the token: %v %v", resp, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("the connection after a 401: %v, want it closed (EOF)", err)
	}

	// One address takes what it can; another address's token client is served.
	one := holdFrom(t, bin, addr, 3000, 2, 1)
	if code, body := get(t, fmt.Sprintf("http://%s/v1/health", addr), "Bearer "+token); code != http.StatusOK {
		t.Errorf("a token client while 127.0.0.2 holds %d connections: %d %s", one.held, code, body)
	}
	one.release()

	// 25 000 from ten addresses, in two processes.
	start := time.Now()
	h1 := holdFrom(t, bin, addr, 12500, 10, 5)
	h2 := holdFrom(t, bin, addr, 12500, 15, 5)
	open, limit := openFDs(d.pid), fileLimit(t, d.pid)
	t.Logf("%d connections held in %v; the daemon has %d files open of %d", h1.held+h2.held, time.Since(start).Round(time.Millisecond), open, limit)
	if open > limit/2 {
		t.Errorf("the daemon has %d files open of its limit %d during the flood: TCP clients took what the socket and the Engine need", open, limit)
	}
	r := e.runTimeout(binA, 30*time.Second, "ps")
	if r.Code != 0 {
		t.Errorf("ps during the flood: %s", r)
	}
	r = e.runTimeout(binA, 60*time.Second, "run", "--", "echo", "flood-ok")
	if r.Code != 0 || !strings.Contains(r.Stdout, "flood-ok") {
		t.Errorf("run during the flood: %s", r)
	}
	t.Logf("the daemon has %d files open after ps and run", openFDs(d.pid))
	h1.release()
	h2.release()
}
