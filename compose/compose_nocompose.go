//go:build nocompose

package compose

import "context"

// Load refuses: this airlock was built without compose support (the build
// tag nocompose), as the supervisor injected into sandboxes is (make
// supervisors): it never loads a manifest, and compose-go's JSON-schema
// compiler would add ~15 ms to the start of every process in a sandbox.
func Load(ctx context.Context, o Options) (*Result, []Error) {
	return nil, []Error{{Msg: "cannot load the compose file: this airlock binary was built without compose support (build tag nocompose)"}}
}

// Referenced lists nothing: Load refuses every compose file in this build.
func Referenced(o Options, read func(string) ([]byte, error)) ([]string, error) {
	return nil, nil
}
