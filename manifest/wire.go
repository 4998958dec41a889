package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// DecodeJSON reads a manifest as JSON (what `airlock config --json` prints and
// what a client sends the control daemon) strictly, as a layer is decoded: an
// unknown key, a value of the wrong type or trailing data is an error, never
// silently dropped. Validate the result (Restore, then Validate) before use.
func DecodeJSON(data []byte) (Manifest, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, err
	}
	if dec.More() {
		return Manifest{}, errors.New("trailing data after the manifest")
	}
	return m, nil
}

// Wire is a resolved manifest as it travels to the control daemon and as the
// daemon keeps it: the manifest (as `airlock config --json` prints it) with every
// substituted value masked, where it came from, and where each substituted value
// came from ("host" or "vault", by key path). The substituted values themselves
// travel apart and stay in the daemon's memory only. ToWire makes it, FromWire
// reads it back; client.Manifest has the same fields and JSON.
type Wire struct {
	File       string            `json:"file"`
	ProjectDir string            `json:"project_dir"`
	Resolved   json.RawMessage   `json:"resolved"`
	Sources    map[string]string `json:"sources,omitempty"`
}

// ToWire splits r into its wire form, which holds no substituted value, and
// those values by key path.
func (r *Resolved) ToWire() (Wire, map[string]string, error) {
	m, values := r.Redacted()
	b, err := json.Marshal(m)
	if err != nil {
		return Wire{}, nil, fmt.Errorf("cannot encode the manifest: %w", err)
	}
	sources := map[string]string{}
	for k, v := range r.Sources {
		if v != Literal {
			sources[k] = v.String()
		}
	}
	return Wire{File: r.File, ProjectDir: r.ProjectDir, Resolved: b, Sources: sources}, values, nil
}

// FromWire reads a wire manifest back: the manifest decoded strictly
// (DecodeJSON), its sources, and values (by key path, as ToWire returned them)
// put back in place of the masks; a value not given stays masked (a daemon that
// restarted knows which values were substituted, not the values). Validate the
// result before use.
func FromWire(w Wire, values map[string]string) (*Resolved, error) {
	m, err := DecodeJSON(w.Resolved)
	if err != nil {
		return nil, fmt.Errorf("cannot decode the manifest: %w", err)
	}
	sources := make(map[string]Source, len(w.Sources))
	for k, v := range w.Sources {
		switch v {
		case Host.String():
			sources[k] = Host
		case Vault.String():
			sources[k] = Vault
		case Literal.String():
		default:
			return nil, fmt.Errorf("cannot decode the manifest: the source of %s is %q, not host or vault", k, v)
		}
	}
	return Restore(m, w.File, w.ProjectDir, sources, values), nil
}
