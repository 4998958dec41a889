package supervisor

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

const goodLine = `{"time":"2026-01-02T03:04:05.123456789Z","kind":"daemon.exited","daemon":"redis","pid":42,"exit_code":3,"reason":"restarting"}`

func TestReadStatus(t *testing.T) {
	long := `{"time":"2026-01-02T03:04:05Z","kind":"daemon.started","daemon":"x","reason":"` + strings.Repeat("a", MaxStatusLine) + `"}`
	input := strings.Join([]string{
		goodLine,
		"",
		"not json",
		`{"time":"2026-01-02T03:04:05Z","kind":"daemon.exploded","daemon":"x"}`,   // unknown kind
		`{"time":"yesterday","kind":"daemon.ready","daemon":"x"}`,                 // bad time
		`{"time":"2026-01-02T03:04:05Z","kind":"daemon.ready"}`,                   // no daemon
		`{"time":"2026-01-02T03:04:05Z","kind":"daemon.ready","daemon":"../etc"}`, // bad name
		`{"time":"2026-01-02T03:04:05Z","kind":"daemon.exited","daemon":"x","exit_code":999}`,
		`{"time":"2026-01-02T03:04:05Z","kind":"daemon.exited","daemon":"x","signal":"SIGBOGUS"}`,
		`{"time":"2026-01-02T03:04:05Z","kind":"daemon.exited","daemon":"x","pid":-1}`,
		`{"time":"2026-01-02T03:04:05Z","kind":"daemon.restarting","daemon":"x","delay_ms":-5}`,
		`{"time":"2026-01-02T03:04:05Z","kind":"daemon.restarting","daemon":"x","attempt":"one"}`,
		`{"time":"2026-01-02T03:04:05Z","kind":"main.exited","daemon":"x","exit_code":0}`,
		long,
		`{"time":"2026-01-02T03:04:06Z","kind":"main.exited","exit_code":0,"future_field":[1,2]}`,
		`{"time":"2026-01-02T03:04:07Z","kind":"daemon.killed","daemon":"y","signal":"SIGKILL"}`, // no newline at the end
	}, "\n")
	d := NewStatusDecoder(strings.NewReader(input))
	var got []StatusEvent
	for {
		e, err := d.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
	}
	if len(got) != 3 || got[0].Daemon != "redis" || *got[0].ExitCode != 3 || got[1].Kind != KindMainExited || got[2].Signal != "SIGKILL" {
		t.Fatalf("events: %+v", got)
	}
	if d.Skipped() != 12 {
		t.Errorf("skipped %d lines, want 12", d.Skipped())
	}
	if got[0].Time.Nanosecond() != 123456789 {
		t.Errorf("time %v", got[0].Time)
	}
}

func TestReadStatusReaderError(t *testing.T) {
	r := io.MultiReader(strings.NewReader(goodLine+"\n"), iotest.ErrReader(errors.New("disk on fire")))
	evs, err := ReadStatus(r)
	if len(evs) != 1 || err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("%v %v", evs, err)
	}
}

// TestStatusRoundTrip: what the writer writes, the reader reads back.
func TestStatusRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2026, 5, 6, 7, 8, 9, 10, time.UTC)
	w := &statusWriter{w: &buf, now: func() time.Time { return now }}
	in := []StatusEvent{
		{Kind: KindDaemonStarted, Daemon: "a", PID: 7},
		{Kind: KindDaemonExited, Daemon: "a", PID: 7, ExitCode: ptr(0), Reason: "not restarted"},
		{Kind: KindDaemonRestarting, Daemon: "a", Attempt: 2, DelayMS: ptr(int64(2000))},
		{Kind: KindDaemonKilled, Daemon: "a", Signal: "SIGKILL"},
		{Kind: KindSupervisorReady, PID: 9},
		{Kind: KindMainExited, ExitCode: ptr(143), Signal: "SIGTERM"},
	}
	for _, e := range in {
		w.emit(e)
	}
	if !strings.Contains(buf.String(), `"time":"2026-05-06T07:08:09.00000001Z"`) {
		t.Errorf("time format: %s", buf.String())
	}
	out, err := ReadStatus(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		in[i].Time = now
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("round trip:\n%+v\n%+v", in, out)
	}
}

// FuzzReadStatus: any input reads without panic, every event returned is
// valid, and writing it back reads back the same.
func FuzzReadStatus(f *testing.F) {
	f.Add([]byte(goodLine + "\n"))
	f.Add([]byte(goodLine))
	f.Add([]byte("\n\n{}\n{\"kind\":1}\n"))
	f.Add([]byte(`{"time":"2026-01-02T03:04:05Z","kind":"daemon.restarting","daemon":"x","attempt":3,"delay_ms":3000}` + "\n"))
	f.Add([]byte(`{"time":"2026-01-02T03:04:05Z","kind":"supervisor.failed","reason":"daemon x not ready"}`))
	f.Add([]byte(`{"time":"2026-01-02T03:04:05Z","kind":"main.exited","exit_code":130,"signal":"SIGINT"}` + "\r\n"))
	f.Add([]byte(`{"time":"2026-01-02T03:04:05Z","kind":"daemon.ready","daemon":"x","daemon":"y"}`))
	f.Add([]byte("{\"time\":\"2026-01-02T03:04:05Z\",\"kind\":\"daemon.ready\",\"daemon\":\"\xff\"}"))
	f.Add([]byte(strings.Repeat("{", MaxStatusLine+10) + "\n" + goodLine))
	f.Add([]byte(`[1,2,3]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		evs, err := ReadStatus(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("error from an in-memory reader: %v", err)
		}
		var buf bytes.Buffer
		w := &statusWriter{w: &buf}
		for _, e := range evs {
			if err := e.Validate(); err != nil {
				t.Fatalf("invalid event returned: %v", err)
			}
			at := e.Time
			w.now = func() time.Time { return at }
			w.emit(e)
		}
		again, err := ReadStatus(&buf)
		if err != nil || len(again) != len(evs) {
			t.Fatalf("re-read %d of %d events: %v", len(again), len(evs), err)
		}
		for i := range evs {
			if !again[i].Time.Equal(evs[i].Time) {
				t.Fatalf("time %v became %v", evs[i].Time, again[i].Time)
			}
			again[i].Time = evs[i].Time
			if !reflect.DeepEqual(again[i], evs[i]) {
				t.Fatalf("event %+v became %+v", evs[i], again[i])
			}
		}
	})
}
