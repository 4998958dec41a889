package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/manifest"
)

// snapshotSecrets resolves again the substituted values (${NAME} from the
// environment, vault values) that the manifest snapshot name recorded needs:
// a snapshot keeps where each came from (by key path), never the value. The
// manifest file it was made from (or --file) is loaded as `up` loads one —
// the environment, the vault, its layers checked against the trust record —
// and its values at those key paths are the create's secrets; they go to the
// daemon in the request only. None needed (or no such snapshot: the create
// says so): nil.
func (a *app) snapshotSecrets(ctx context.Context, c *client.Client, name string) (map[string]string, error) {
	list, err := c.Snapshots(ctx)
	if err != nil {
		return nil, snapshotFailure(err)
	}
	var m *client.Manifest
	for _, s := range list {
		if s.Name == name {
			m = s.Manifest
			break
		}
	}
	if m == nil || len(m.Sources) == 0 {
		return nil, nil
	}
	keys := slices.Sorted(maps.Keys(m.Sources))
	fail := func(err error) error {
		// The loader's errors are config errors already: one prefix a line.
		msg := strings.ReplaceAll(err.Error(), "config error: ", "")
		return configError(fmt.Errorf("cannot create a sandbox from snapshot %s: its manifest substitutes %s, which must be resolved again: %s",
			name, strings.Join(keys, ", "), msg))
	}
	if a.opts.file == "" {
		if m.File == "" {
			return nil, fail(errors.New("the snapshot names no manifest file to resolve them from: pass --file, or give them through the API (secrets)"))
		}
		a.opts.file = m.File
	}
	r, layers, err := a.loadManifestLayers()
	if err != nil {
		return nil, fail(err)
	}
	if err := a.checkLayers(ctx, r, layers); err != nil {
		return nil, err
	}
	_, values := r.Redacted()
	out := make(map[string]string, len(keys))
	var missing []string
	for _, k := range keys {
		v, ok := values[k]
		if !ok {
			missing = append(missing, k)
			continue
		}
		out[k] = v
	}
	if len(missing) > 0 {
		return nil, fail(fmt.Errorf("%s no longer substitutes %s", r.File, strings.Join(missing, ", ")))
	}
	for k, v := range values {
		// The secret variables' values inside them, masked on their own too.
		if field, ok := manifest.PieceField(k); ok && slices.Contains(keys, field) {
			out[k] = v
		}
	}
	return out, nil
}
