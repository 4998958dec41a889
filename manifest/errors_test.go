package manifest_test

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/airlock-dev/airlock/manifest"
)

func TestErrorText(t *testing.T) {
	tests := []struct {
		err  manifest.Error
		want string
	}{
		{manifest.Error{File: "sandbox.toml", Line: 3, Key: "daemons.redis.signal", Msg: "bad"}, "sandbox.toml:3: daemons.redis.signal: bad"},
		{manifest.Error{File: "sandbox.toml", Key: "presets", Msg: "bad"}, "sandbox.toml: presets: bad"},
		{manifest.Error{Key: "sandbox.image", Msg: "is required"}, "sandbox.image: is required"},
		{manifest.Error{File: "preset redis", Line: 1, Msg: "syntax"}, "preset redis:1: syntax"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestIsConfigError(t *testing.T) {
	p := newProject(t, map[string]string{"sandbox.toml": "[sandbox]\nimage = 1\n"})
	_, single := p.load()
	p.write(map[string]string{"sandbox.toml": "[sandbox]\nnetwork = \"x\"\n"})
	_, many := p.load()
	if _, ok := many.(manifest.Errors); !ok {
		t.Fatalf("validation error is %T, want manifest.Errors", many)
	}
	for name, err := range map[string]error{
		"decode error":     single,
		"validation error": many,
		"wrapped":          fmt.Errorf("loading: %w", many),
	} {
		if !manifest.IsConfigError(err) {
			t.Errorf("%s: IsConfigError(%v) = false", name, err)
		}
	}
	for _, err := range []error{nil, errors.New("docker is down"), &fs.PathError{Op: "open", Path: "sandbox.toml", Err: fs.ErrPermission}} {
		if manifest.IsConfigError(err) {
			t.Errorf("IsConfigError(%v) = true", err)
		}
	}
}
