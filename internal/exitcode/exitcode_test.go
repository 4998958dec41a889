package exitcode

import (
	"errors"
	"fmt"
	"testing"
)

// TestOfSandbox: a coded failure ends with its code (a config error's lines
// marked), ErrNotFound with Failure, an exit already decided as it is,
// anything else with Airlock; a Coded error is never taken for an Error.
func TestOfSandbox(t *testing.T) {
	if OfSandbox(nil) != nil {
		t.Error("OfSandbox(nil) is not nil")
	}
	decided := With(NotFound, errors.New("decided"))
	for _, c := range []struct {
		err  error
		code int
		msg  string
	}{
		{&Coded{Code: Usage, Err: errors.New("a\nb")}, Usage, "config error: a\nconfig error: b"},
		{fmt.Errorf("wrapped: %w", &Coded{Code: Airlock, Err: errors.New("broke")}), Airlock, "wrapped: broke"},
		{fmt.Errorf("cannot open: %w", ErrNotFound), Failure, "cannot open: no such sandbox"},
		{decided, NotFound, "decided"},
		{errors.New("other"), Airlock, "other"},
	} {
		got := OfSandbox(c.err)
		var e *Error
		if !errors.As(got, &e) || e.Code != c.code || got.Error() != c.msg {
			t.Errorf("OfSandbox(%q) = %v (%T), want code %d and %q", c.err, got, got, c.code, c.msg)
		}
	}
	var ce *Coded
	if errors.As(decided, &ce) {
		t.Error("an Error was taken for a Coded error")
	}
	var e *Error
	if errors.As(&Coded{Code: Usage, Err: errors.New("x")}, &e) {
		t.Error("a Coded error was taken for an Error")
	}
}
