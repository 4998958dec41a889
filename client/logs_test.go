package client_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/supervisor"
)

// TestRecordTags: the client reads the tags the supervisor writes.
func TestRecordTags(t *testing.T) {
	if client.RecordStdout != supervisor.RecordStdout || client.RecordStderr != supervisor.RecordStderr {
		t.Errorf("client tags %q %q, supervisor's %q %q", client.RecordStdout, client.RecordStderr, supervisor.RecordStdout, supervisor.RecordStderr)
	}
}

// TestSplitLog: each record's line goes to stdout or stderr by its tag, with
// its newline, however the log is cut into writes; a line without a tag goes
// to stdout as it is; a last line without a newline goes out too.
func TestSplitLog(t *testing.T) {
	in := "o out 1\ne err 1\no \ne \nx untagged\no\nplain\ne err 2\n\no last"
	wantOut := "out 1\n\nx untagged\no\nplain\n\nlast"
	wantErr := "err 1\n\nerr 2\n"
	for _, size := range []int{1, 2, 3, 5, len(in)} {
		var out, errb bytes.Buffer
		s := &client.LogSplitter{Stdout: &out, Stderr: &errb}
		for i := 0; i < len(in); i += size {
			if _, err := s.Write([]byte(in[i:min(i+size, len(in))])); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if out.String() != wantOut || errb.String() != wantErr {
			t.Errorf("writes of %d bytes: stdout %q, stderr %q; want %q, %q", size, out.String(), errb.String(), wantOut, wantErr)
		}
	}
	// A line cut before its tag is whole is stdout's.
	var out, errb bytes.Buffer
	if err := client.SplitLog(bytes.NewReader([]byte("e err\no")), &out, &errb); err != nil || out.String() != "o" || errb.String() != "err\n" {
		t.Errorf("SplitLog: %v, stdout %q, stderr %q", err, out.String(), errb.String())
	}
}

// TestDaemonLogStream: DaemonLog asks for a stream: both unless it says
// otherwise, stderr with the older Stderr.
func TestDaemonLogStream(t *testing.T) {
	var got []string
	sock := serveUnix(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.URL.RawQuery)
		_, _ = io.WriteString(w, "o x\n")
	}))
	c := client.New(sock)
	for _, o := range []client.LogOptions{
		{Tail: -1},
		{Stderr: true, Tail: -1},
		{Stream: client.StreamStdout, Tail: 2},
		{Stream: client.StreamBoth, Tail: -1, Follow: true},
	} {
		rc, err := c.DaemonLog(ctx(t), "s1", "db", o)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, rc)
		rc.Close()
	}
	want := []string{
		"daemon=db&stream=both",
		"daemon=db&stream=stderr",
		"daemon=db&stream=stdout&tail=2",
		"daemon=db&follow=1&stream=both",
	}
	if len(got) != len(want) {
		t.Fatalf("queries %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("query %d: %q, want %q", i, got[i], want[i])
		}
	}
}
