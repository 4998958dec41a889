package supervisor

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
)

// channelClient is the host's end of ServeChannel over pipes, for tests.
type channelClient struct {
	in   *io.PipeWriter
	out  *io.PipeReader
	done chan error
}

func serveChannel(t *testing.T) *channelClient {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &channelClient{in: inW, out: outR, done: make(chan error, 1)}
	go func() {
		err := ServeChannel(inR, outW)
		outW.Close()
		c.done <- err
	}()
	t.Cleanup(func() { inW.Close(); outR.Close() })
	return c
}

// collect reads frames until n commands ended: each one's stdout, stderr and end.
func (c *channelClient) collect(t *testing.T, n int) (stdout, stderr map[uint32]string, exits map[uint32]ChannelExit) {
	t.Helper()
	stdout, stderr, exits = map[uint32]string{}, map[uint32]string{}, map[uint32]ChannelExit{}
	started := map[uint32]bool{}
	for len(exits) < n {
		typ, id, payload, err := ReadChannelFrame(c.out)
		if err != nil {
			t.Fatalf("after %d ends: %v", len(exits), err)
		}
		switch typ {
		case ChanStdout:
			stdout[id] += string(payload)
		case ChanStderr:
			stderr[id] += string(payload)
		case ChanStarted:
			if started[id] {
				t.Fatalf("command %d started twice", id)
			}
			started[id] = true
		case ChanExit:
			if !started[id] && id != 4 {
				t.Fatalf("command %d ended before it was said started", id)
			}
			if _, dup := exits[id]; dup {
				t.Fatalf("command %d ended twice", id)
			}
			var e ChannelExit
			if err := json.Unmarshal(payload, &e); err != nil {
				t.Fatal(err)
			}
			exits[id] = e
		default:
			t.Fatalf("an unknown frame %q", typ)
		}
	}
	return stdout, stderr, exits
}

// TestChannelRunsCommands: commands started through the channel run at the
// same time, each with its own output and exit code (128+N when killed by
// signal N, as an Engine exec reports it), all output before the end; one
// that cannot start ends 127 and says why; the channel ends when its input
// ends, after the commands still running.
func TestChannelRunsCommands(t *testing.T) {
	c := serveChannel(t)
	// 1 waits for 2 to have written its file: they run at once.
	dir := t.TempDir()
	starts := [][]string{
		{"/bin/sh", "-c", fmt.Sprintf(`while [ ! -e %s/two ]; do sleep 0.01; done; echo one; echo err-one >&2; exit 3`, dir)},
		{"/bin/sh", "-c", fmt.Sprintf(`touch %s/two; head -c 100000 /dev/zero | tr '\0' x`, dir)},
		{"/bin/sh", "-c", "kill -9 $$"},
		{"/no/such/command"},
		{"/bin/sh", "-c", "read x || echo stdin-eof"},
	}
	go func() { // frames come back while these go out
		for i, argv := range starts {
			b, _ := json.Marshal(ChannelStart{Argv: argv})
			_ = WriteChannelFrame(c.in, ChanStart, uint32(i+1), b)
		}
	}()
	stdout, stderr, exits := c.collect(t, len(starts))
	if stdout[1] != "one\n" || stderr[1] != "err-one\n" || exits[1].Code != 3 {
		t.Errorf("command 1: %q %q %+v", stdout[1], stderr[1], exits[1])
	}
	if stdout[2] != strings.Repeat("x", 100000) || exits[2].Code != 0 {
		t.Errorf("command 2: %d bytes, %+v", len(stdout[2]), exits[2])
	}
	if exits[3].Code != 137 {
		t.Errorf("command 3, killed: %+v, want 137", exits[3])
	}
	if exits[4].Code != 127 || !strings.Contains(exits[4].Error, "/no/such/command") {
		t.Errorf("command 4, not found: %+v, want 127 naming it", exits[4])
	}
	if stdout[5] != "stdin-eof\n" || exits[5].Code != 0 {
		t.Errorf("command 5 reads /dev/null: %q %+v", stdout[5], exits[5])
	}
	c.in.Close()
	if err := <-c.done; err != nil {
		t.Errorf("the channel's end: %v", err)
	}
}

// TestChannelFrames: a frame round-trips; one longer than the bound is
// refused both ways.
func TestChannelFrames(t *testing.T) {
	var b strings.Builder
	if err := WriteChannelFrame(&b, ChanStdout, 7, []byte("data")); err != nil {
		t.Fatal(err)
	}
	typ, id, payload, err := ReadChannelFrame(strings.NewReader(b.String()))
	if err != nil || typ != ChanStdout || id != 7 || string(payload) != "data" {
		t.Errorf("round trip: %q %d %q %v", typ, id, payload, err)
	}
	if err := WriteChannelFrame(io.Discard, ChanStdout, 1, make([]byte, MaxChannelPayload+1)); err == nil {
		t.Error("a frame over the bound was written")
	}
	big := []byte{ChanStdout, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff}
	if _, _, _, err := ReadChannelFrame(strings.NewReader(string(big))); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("a frame announcing 4 GiB: %v", err)
	}
}
