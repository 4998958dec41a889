package backend

import (
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
)

// recordingExecer records the one exec it is asked for and answers with code
// and out.
type recordingExecer struct {
	cmd   []string
	stdin []byte
	code  int
	out   string
}

func (r *recordingExecer) ExecIn(_ context.Context, _ string, cmd []string, stdin io.Reader, stdout, _ io.Writer) (int, error) {
	r.cmd = cmd
	if stdin != nil {
		r.stdin, _ = io.ReadAll(stdin)
	}
	_, _ = io.WriteString(stdout, r.out)
	return r.code, nil
}

// TestExecArgvDeliversValuesApart: an exec's -e values go to the stdin of a
// delivery exec, and the exec's command line names only the one-time file; with
// no values there is no delivery; a supervisor too old to take them is an error
// that shows no value, never a fallback to the command line.
func TestExecArgvDeliversValuesApart(t *testing.T) {
	const secret = "argv-s3cret"
	ex := &recordingExecer{}
	argv, err := ExecArgv(context.Background(), ex, "c1", ExecRequest{Cmd: []string{"env"}, Env: []string{"TOK=" + secret, "B=x"}, Workdir: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.Join(argv, " "), secret) {
		t.Errorf("the exec's argv holds a value: %q", argv)
	}
	i := slices.Index(argv, "--values")
	if i < 0 || !strings.HasPrefix(argv[i+1], RunMount+"/exec-") || !slices.Equal(argv[len(argv)-3:], []string{"/w", "--", "env"}) {
		t.Fatalf("argv %q", argv)
	}
	if want := []string{SupervisorIn, "supervise", "deliver", "--exec-env", argv[i+1]}; !slices.Equal(ex.cmd, want) {
		t.Errorf("delivery exec %q, want %q", ex.cmd, want)
	}
	var got []string
	if err := json.Unmarshal(ex.stdin, &got); err != nil || !slices.Equal(got, []string{"TOK=" + secret, "B=x"}) {
		t.Errorf("delivered %q (%v)", ex.stdin, err)
	}
	// A second exec gets a file of its own.
	argv2, _ := ExecArgv(context.Background(), &recordingExecer{}, "c1", ExecRequest{Cmd: []string{"env"}, Env: []string{"A=1"}})
	if argv2[slices.Index(argv2, "--values")+1] == argv[i+1] {
		t.Error("two execs share a values file")
	}

	none := &recordingExecer{}
	argv, err = ExecArgv(context.Background(), none, "c1", ExecRequest{Cmd: []string{"true"}})
	if err != nil || none.cmd != nil || slices.Contains(argv, "--values") {
		t.Errorf("no values: argv %q, delivery %q, %v", argv, none.cmd, err)
	}

	old := &recordingExecer{code: 2, out: "airlock: unknown flag: --exec-env\n"}
	_, err = ExecArgv(context.Background(), old, "c1", ExecRequest{Cmd: []string{"env"}, Env: []string{"TOK=" + secret}})
	if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "older airlock") {
		t.Errorf("an old supervisor: %v", err)
	}
}
