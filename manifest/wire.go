package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
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
