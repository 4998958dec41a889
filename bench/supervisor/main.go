// Command benchsupervisor measures the in-container supervisor (`airlock
// supervise`) on the host: readiness latency, parallel shutdown time and
// resident memory, prints the figures and records them in docs/benchmarks.md
// under "## Supervisor". It is run by scripts/bench-supervisor.sh; the same
// binary, re-executed with $BENCH_SUPERVISOR_MODE, plays the daemons and main
// commands.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/bench/benchdoc"
	"github.com/airlock-dev/airlock/supervisor"
	"github.com/airlock-dev/airlock/test/testenv"
)

const modeEnv = "BENCH_SUPERVISOR_MODE"

func main() {
	if mode := os.Getenv(modeEnv); mode != "" {
		os.Exit(helper(mode, os.Args[1:]))
	}
	o := benchdoc.Flags("scripts/bench-supervisor.sh")
	runs := flag.Int("runs", 10, "runs of the readiness measure")
	flag.Parse()
	benchdoc.Exit("benchsupervisor", bench(o.Airlock, o.Doc, o.Command, *runs))
}

// helper modes: "listen ADDR FILE" opens ADDR after 200 ms plus a random
// fraction of the 10 ms poll interval (so the runs do not all fall at the same
// phase of the poll), writes the time it did to FILE and accepts forever;
// "stamp FILE" writes the time it started.
func helper(mode string, args []string) int {
	switch mode {
	case "listen":
		time.Sleep(200*time.Millisecond + rand.N(10*time.Millisecond))
		l, err := net.Listen("tcp", args[0])
		if err != nil {
			return 1
		}
		stamp(args[1])
		for {
			c, err := l.Accept()
			if err != nil {
				return 1
			}
			_ = c.Close()
		}
	case "stamp":
		stamp(args[0])
		return 0
	}
	return 2
}

func stamp(file string) {
	_ = os.WriteFile(file, []byte(strconv.FormatInt(time.Now().UnixNano(), 10)), 0o644)
}

func readStamp(file string) (time.Time, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return time.Time{}, err
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	return time.Unix(0, n), err
}

type figures struct {
	readyMedian, readyMax       time.Duration // port open -> main started
	supReadyMedian              time.Duration // port open -> supervisor.ready event
	shutdownMedian, shutdownMax time.Duration
	rssKB, hwmKB                int
}

func bench(airlock, doc, command string, runs int) error {
	airlock, err := filepath.Abs(airlock)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var f figures
	fmt.Printf("supervisor: readiness latency (%d runs)...\n", runs)
	if err := benchReady(airlock, self, runs, &f); err != nil {
		return err
	}
	fmt.Println("supervisor: parallel shutdown (3 runs)...")
	if err := benchShutdown(airlock, self, 3, &f); err != nil {
		return err
	}
	fmt.Println("supervisor: memory with five daemons...")
	if err := benchRSS(airlock, &f); err != nil {
		return err
	}
	rows := [][3]string{
		{"daemon port open → main command started (median / max of " + strconv.Itoa(runs) + ")", ms(f.readyMedian) + " / " + ms(f.readyMax), "≤ 50 ms"},
		{"daemon port open → supervisor starts the main command (median)", ms(f.supReadyMedian), ""},
		{"shutdown of 5 daemons ignoring SIGTERM, timeout = 2 (median / max of 3)", secs(f.shutdownMedian) + " / " + secs(f.shutdownMax), "≤ 2.3 s"},
		{"supervisor RSS with 5 daemons running (peak)", mib(f.rssKB) + " (" + mib(f.hwmKB) + ")", "≤ 15 MB"},
	}
	verdicts := []bool{f.readyMax <= 50*time.Millisecond, true, f.shutdownMax <= 2300*time.Millisecond, f.rssKB*1024 <= 15_000_000}
	fmt.Println()
	for i, r := range rows {
		v := ""
		if r[2] != "" {
			v = "  ok"
			if !verdicts[i] {
				v = "  MISSED"
			}
			v = "  (target " + r[2] + ")" + v
		}
		fmt.Printf("  %-72s %s%s\n", r[0], r[1], v)
	}
	if doc == "" {
		return nil
	}
	return writeSection(doc, command, rows)
}

func ms(d time.Duration) string   { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
func mib(kb int) string           { return fmt.Sprintf("%.1f MiB", float64(kb)/1024) }

// run is one supervisor run in its own temp dir.
type run struct {
	dir  string
	spec supervisor.Spec
	cmd  *exec.Cmd
}

func newRun() (*run, error) {
	dir, err := os.MkdirTemp("", "bench-supervisor-")
	if err != nil {
		return nil, err
	}
	r := &run{dir: dir}
	r.spec = supervisor.Spec{Version: 1, LogDir: filepath.Join(dir, "logs"), StatusFile: filepath.Join(dir, "status.jsonl"), Quiet: true}
	return r, nil
}

func (r *run) start(airlock string) error {
	data, err := json.Marshal(&r.spec)
	if err != nil {
		return err
	}
	spec := filepath.Join(r.dir, "spec.json")
	if err := os.WriteFile(spec, data, 0o644); err != nil {
		return err
	}
	r.cmd = exec.Command(airlock, "supervise", "--spec", spec)
	r.cmd.Stdout, r.cmd.Stderr = os.Stdout, os.Stderr
	return r.cmd.Start()
}

func (r *run) wait() error {
	err := r.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return fmt.Errorf("supervisor exited with %d", ee.ExitCode())
	}
	return err
}

func (r *run) events() []supervisor.StatusEvent {
	f, err := os.Open(r.spec.StatusFile)
	if err != nil {
		return nil
	}
	defer f.Close()
	evs, _ := supervisor.ReadStatus(f)
	return evs
}

func (r *run) cleanup() { _ = os.RemoveAll(r.dir) }

func helperEnv(mode string) []supervisor.EnvEntry {
	return []supervisor.EnvEntry{{Name: modeEnv, Value: &mode}}
}

func benchReady(airlock, self string, runs int, f *figures) error {
	var toMain, toSup []time.Duration
	for i := 0; i < runs; i++ {
		r, err := newRun()
		if err != nil {
			return err
		}
		addr, err := testenv.FreeLoopbackAddr()
		if err != nil {
			return err
		}
		listened, started := filepath.Join(r.dir, "listened"), filepath.Join(r.dir, "started")
		timeout := 0
		r.spec.Daemons = []*supervisor.Daemon{{
			Name: "svc", Command: []string{self, addr, listened}, Env: helperEnv("listen"), Timeout: &timeout,
			Ready: &supervisor.Ready{TCP: addr, Timeout: "10s"},
		}}
		r.spec.Main = supervisor.Main{Argv: []string{self, started}, Env: helperEnv("stamp")}
		if err := r.start(airlock); err != nil {
			return err
		}
		if err := r.wait(); err != nil {
			return err
		}
		open, err1 := readStamp(listened)
		mainAt, err2 := readStamp(started)
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("readiness run %d: %w", i+1, err)
		}
		toMain = append(toMain, mainAt.Sub(open))
		for _, e := range r.events() {
			if e.Kind == supervisor.KindSupervisorReady {
				toSup = append(toSup, e.Time.Sub(open))
			}
		}
		r.cleanup()
	}
	f.readyMedian, f.readyMax = benchdoc.Median(toMain), slices.Max(toMain)
	if len(toSup) > 0 {
		f.supReadyMedian = benchdoc.Median(toSup)
	}
	return nil
}

func benchShutdown(airlock, self string, runs int, f *figures) error {
	var took []time.Duration
	for i := 0; i < runs; i++ {
		r, err := newRun()
		if err != nil {
			return err
		}
		for j := 1; j <= 5; j++ {
			timeout := 2
			r.spec.Daemons = append(r.spec.Daemons, &supervisor.Daemon{
				Name: fmt.Sprintf("stubborn%d", j), Timeout: &timeout,
				Command: []string{"/bin/sh", "-c", "trap '' TERM; echo up; while :; do sleep 1; done"},
				Ready:   &supervisor.Ready{Log: "^up$", Timeout: "10s"},
			})
		}
		ended := filepath.Join(r.dir, "ended")
		r.spec.Main = supervisor.Main{Argv: []string{self, ended}, Env: helperEnv("stamp")}
		if err := r.start(airlock); err != nil {
			return err
		}
		if err := r.wait(); err != nil {
			return err
		}
		done := time.Now()
		mainEnd, err := readStamp(ended)
		if err != nil {
			return err
		}
		took = append(took, done.Sub(mainEnd))
		r.cleanup()
	}
	f.shutdownMedian, f.shutdownMax = benchdoc.Median(took), slices.Max(took)
	return nil
}

func benchRSS(airlock string, f *figures) error {
	r, err := newRun()
	if err != nil {
		return err
	}
	defer r.cleanup()
	for j := 1; j <= 5; j++ {
		r.spec.Daemons = append(r.spec.Daemons, &supervisor.Daemon{
			Name: fmt.Sprintf("sleeper%d", j), Command: []string{"/bin/sh", "-c", "echo up; exec sleep 1000"},
			Ready: &supervisor.Ready{Log: "^up$", Timeout: "10s"},
		})
	}
	stop := filepath.Join(r.dir, "STOP")
	r.spec.Main = supervisor.Main{Argv: []string{"/bin/sh", "-c", "while [ ! -e " + stop + " ]; do sleep 0.05; done"}}
	if err := r.start(airlock); err != nil {
		return err
	}
	deadline := time.Now().Add(20 * time.Second)
	for !slices.ContainsFunc(r.events(), func(e supervisor.StatusEvent) bool { return e.Kind == supervisor.KindSupervisorReady }) {
		if time.Now().After(deadline) {
			_ = r.cmd.Process.Kill()
			return errors.New("the supervisor never became ready")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // let it settle with everything running
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", r.cmd.Process.Pid))
	if err != nil {
		return err
	}
	f.rssKB, f.hwmKB = procField(string(status), "VmRSS:"), procField(string(status), "VmHWM:")
	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		return err
	}
	return r.wait()
}

func procField(status, name string) int {
	for _, line := range strings.Split(status, "\n") {
		if strings.HasPrefix(line, name) {
			if fs := strings.Fields(line); len(fs) >= 2 {
				n, _ := strconv.Atoi(fs[1])
				return n
			}
		}
	}
	return 0
}

// writeSection replaces (or appends) the "## Supervisor" section of doc.
func writeSection(doc, command string, rows [][3]string) error {
	var rs []benchdoc.Row
	for _, r := range rows {
		rs = append(rs, benchdoc.Row{Measure: r[0], Result: r[1], Target: r[2]})
	}
	host, _ := os.Hostname()
	intro := fmt.Sprintf("By `%s` on the host (no Docker), %s; host %s.", command, benchdoc.Machine(), host)
	notes := "Readiness is a `tcp` check polled every 10 ms; the main command's start is the time its own process\n" +
		"first ran. Shutdown is from the main command's exit to the supervisor's exit, with each daemon trapping\n" +
		"SIGTERM so that it is SIGKILLed after its 2 s timeout. RSS is read from /proc while five `sleep` daemons run."
	return benchdoc.Write(doc, "Supervisor", intro, rs, notes)
}
