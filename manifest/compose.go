package manifest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/compose"
)

// composeLayer reads the compose file [compose] names (in any layer; the
// highest layer that sets a key of it wins, as everywhere) into a layer of
// [services.*] below every other: presets, sandbox.toml and sandbox.local.toml
// lay their keys over the compose file's services. nil when no layer names one.
func (l *Loader) composeLayer(layers []*layer, manifestDir string) (*layer, error) {
	settings, fileFrom := composeSettings(layers)
	if len(settings) == 0 {
		return nil, nil
	}
	file, _ := settings["file"].(string)
	if fileFrom == nil || file == "" {
		return nil, composeFileRequired(layers)
	}
	if !filepath.IsAbs(file) {
		file = filepath.Join(fileFrom.dir, file)
	}
	opts, err := l.composeOptions(file, fileFrom, settings, manifestDir)
	if err != nil {
		return nil, err
	}
	res, errs, err := l.loadCompose(opts)
	if err != nil {
		return nil, err
	}
	name := l.display(file)
	if len(errs) > 0 {
		return nil, composeErrors(errs, fileFrom, name)
	}
	if err := l.checkComposeEnvFiles(opts, res.Files, name); err != nil {
		return nil, err
	}
	cl := &layer{name: name, dir: filepath.Dir(file), raw: map[string]any{"services": res.Services}, lines: keyLines{}}
	for k, line := range res.Lines {
		cl.lines[KeyPath(strings.Split(k, "\x00")...)] = line
	}
	return cl, nil
}

// composeSettings are the keys of [compose] of every layer, a higher layer's
// over a lower one's, and the highest layer that sets compose.file (nil for
// none).
func composeSettings(layers []*layer) (map[string]any, *layer) {
	var (
		settings = map[string]any{}
		fileFrom *layer
	)
	for _, ly := range layers {
		c, ok := ly.raw["compose"].(map[string]any)
		if !ok {
			continue
		}
		for k, v := range c {
			settings[k] = v
		}
		if _, ok := c["file"]; ok {
			fileFrom = ly
		}
	}
	return settings, fileFrom
}

// composeFileRequired is the error of a [compose] without a file, at the
// highest layer that has a [compose].
func composeFileRequired(layers []*layer) error {
	var from *layer
	for _, ly := range layers {
		if _, ok := ly.raw["compose"]; ok {
			from = ly
		}
	}
	return &Error{File: from.name, Line: from.lines.line([]string{"compose"}), Key: "compose.file", Msg: "is required: the compose file to read, e.g. \"compose.yaml\""}
}

// composeOptions reads the compose file (set in fileFrom) and its .env and
// returns what compose-go loads them with: the settings' lists of services,
// profiles and ignored keys, the environment, and the env_file check.
func (l *Loader) composeOptions(file string, fileFrom *layer, settings map[string]any, manifestDir string) (compose.Options, error) {
	list := func(k string) []string {
		var out []string
		for _, v := range anyList(settings[k]) {
			if s, ok := v.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	// Read through the loader, which records the files a sandbox may not change
	// (trust); compose-go reads them again.
	content, err := l.readFile(file)
	if err != nil {
		return compose.Options{}, &Error{File: fileFrom.name, Line: fileFrom.lines.line([]string{"compose", "file"}), Key: "compose.file", Msg: fmt.Sprintf("cannot read the compose file: %v", err)}
	}
	dotEnv, err := l.readFile(filepath.Join(filepath.Dir(file), ".env"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return compose.Options{}, &Error{File: fileFrom.name, Line: fileFrom.lines.line([]string{"compose", "file"}), Key: "compose.file", Msg: fmt.Sprintf("cannot read the compose file's .env: %v", err)}
	}
	environ := os.Environ()
	if l.Environ != nil {
		environ = l.Environ()
	}
	return compose.Options{
		File: file, Content: content, DotEnv: dotEnv, Services: list("services"), Profiles: list("profiles"), Ignore: list("ignore"), Environ: environ,
		CheckEnvFile: l.envFileCheck(manifestDir),
	}, nil
}

// loadCompose loads the compose file with compose-go. The files the compose
// file includes or extends (and their .env files) are layers too: read
// through the loader first (links, FIFOs and huge files refused, what was read
// recorded), then compared once compose-go has read them itself, so that the
// load used the bytes that were checked. The compose file's own errors are
// returned apart, as compose-go gives them.
func (l *Loader) loadCompose(opts compose.Options) (*compose.Result, []compose.Error, error) {
	file := opts.File
	readBefore := map[string][]byte{}
	refs, err := compose.Referenced(opts, func(p string) ([]byte, error) {
		data, err := l.readFile(p)
		if err == nil {
			readBefore[p] = data
		}
		return data, err
	})
	var efe *compose.EnvFileError
	if errors.As(err, &efe) {
		return nil, nil, &Error{File: l.display(efe.File), Line: efe.Line, Key: KeyPath(efe.Path...), Msg: efe.Err.Error()}
	}
	if err != nil {
		return nil, nil, &Error{File: l.display(file), Key: "compose.file", Msg: err.Error()}
	}
	res, errs := compose.Load(context.Background(), opts)
	for _, p := range refs {
		data, err := ReadLayer(p)
		before, had := readBefore[p]
		if had != (err == nil) || had && !bytes.Equal(before, data) {
			return nil, nil, &Error{File: l.display(file), Key: "compose.file", Msg: fmt.Sprintf("%s changed while the compose file was loaded; run again", l.display(p))}
		}
	}
	return res, errs, nil
}

// composeErrors are compose-go's errors as the manifest's: those of the file
// as a whole at compose.file (in fileFrom), those of a service named in
// compose.services there, the others at their key of the compose file name.
func composeErrors(errs []compose.Error, fileFrom *layer, name string) Errors {
	var out Errors
	for _, e := range errs {
		switch {
		case e.Path == nil && e.Line == 0:
			out = append(out, &Error{File: fileFrom.name, Line: fileFrom.lines.line([]string{"compose", "file"}), Key: "compose.file", Msg: e.Msg})
		case len(e.Path) == 0:
			// A service named in compose.services.
			out = append(out, &Error{File: fileFrom.name, Line: fileFrom.lines.line([]string{"compose", "services"}), Key: "compose.services", Msg: e.Msg})
		default:
			out = append(out, &Error{File: name, Line: e.Line, Key: KeyPath(e.Path...), Msg: e.Msg})
		}
	}
	return out
}

// checkComposeEnvFiles checks the env files compose-go resolved (~, variables)
// too, and reads them through the loader; name is the compose file's.
func (l *Loader) checkComposeEnvFiles(opts compose.Options, files []string, name string) error {
	for _, f := range files {
		if err := opts.CheckEnvFile(f); err != nil {
			return &Error{File: name, Key: "env_file", Msg: err.Error()}
		}
		if _, err := l.readFile(f); err != nil {
			return &Error{File: name, Key: "env_file", Msg: fmt.Sprintf("cannot read %s: %v", f, err)}
		}
	}
	return nil
}

func anyList(v any) []any {
	switch v := v.(type) {
	case []any:
		return v
	case []string:
		out := make([]any, len(v))
		for i, s := range v {
			out[i] = s
		}
		return out
	}
	return nil
}
