package pool

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/airlock-dev/airlock/manifest"
)

// Key is the strict key of what a sandbox made from r on rt now would be: the
// plan (every layer; [sandbox.pool] itself aside) with the image's ID (tags
// move), the Engine, the values baked into objects at creation (services'
// env, image, mount and copy sources: keyed, never shown) and a fingerprint of
// the files copied in. An error says why r cannot be pooled.
func (ps *Pools) Key(ctx context.Context, rt Backend, r *manifest.Resolved, values map[string]string) (string, error) {
	files, ok := rt.(interface {
		CopiedPaths(*manifest.Resolved) []string
	})
	if !ok {
		return "", errors.New("this backend has no warm pool")
	}
	plain := *r
	sb := plain.Sandbox
	sb.Pool = nil
	plain.Sandbox = sb
	plan, err := rt.PlanHashFor(ctx, &plain)
	if err != nil {
		return "", err
	}
	delivered := deliveredAtClaim(r)
	baked := map[string]string{}
	for k, v := range values {
		// A piece is part of a field's value, which is keyed already.
		if _, piece := manifest.PieceField(k); !delivered[k] && !piece {
			baked[k] = v
		}
	}
	fp, err := fingerprint(files.CopiedPaths(r))
	if err != nil {
		return "", err
	}
	b, _ := json.Marshal(struct {
		Plan, Engine, Files string
		Baked               map[string]string
	}{plan, rt.Location().Key(), fp, baked})
	m := hmac.New(sha256.New, ps.secret)
	m.Write(b)
	return hex.EncodeToString(m.Sum(nil))[:16], nil
}

// deliveredAtClaim are the key paths whose values reach a pooled sandbox with
// its claim ([env] and the daemons' env) rather than at its creation.
func deliveredAtClaim(r *manifest.Resolved) map[string]bool {
	out := map[string]bool{}
	for k := range r.Env {
		out[manifest.KeyPath("env", k)] = true
	}
	for name, d := range r.Daemons {
		for k := range d.Env {
			out[manifest.KeyPath("daemons", name, "env", k)] = true
		}
	}
	return out
}

// fingerprint hashes the name, mode, size and modification time of every file
// under paths (in order; links not followed): a change to what is copied in
// changes it.
func fingerprint(paths []string) (string, error) {
	h := sha256.New()
	n := 0
	for _, root := range paths {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				fmt.Fprintf(h, "%s\x00error\x00", p)
				return nil
			}
			if n++; n > maxFingerprintEntries {
				return fmt.Errorf("more than %d files are copied in", maxFingerprintEntries)
			}
			info, err := d.Info()
			if err != nil {
				return nil
			}
			fmt.Fprintf(h, "%s\x00%o\x00%d\x00%d\x00", p, info.Mode(), info.Size(), info.ModTime().UnixNano())
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
