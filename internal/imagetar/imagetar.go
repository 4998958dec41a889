// Package imagetar writes a single-layer container image archive from files,
// without a Docker Engine: the layout `docker save` writes since Docker 25, a
// Docker image archive (manifest.json) and an OCI image layout (oci-layout,
// index.json) over the same blobs, which `docker load` (any version) and
// containerd's `ctr images import` both accept.
//
// The output is deterministic: equal inputs give equal bytes, so the same
// files give the same image ID. Every tar entry, in the archive and in the
// layer, is owned by uid/gid 0 with modification time 0 (the Unix epoch), in
// sorted order.
package imagetar

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/distribution/reference"
)

// Repo is the repository of the airlock image `make image` builds.
const Repo = "localhost/airlock"

// ImageRef is the reference of the airlock image of the build with the given
// build ID (cli.BuildID): "localhost/airlock:<build id>", the characters a tag
// cannot hold (a build ID outside a git checkout has a '+') replaced with '_'.
func ImageRef(buildID string) string {
	return Repo + ":" + tagFor(buildID)
}

// tagFor turns s into a valid tag, [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}.
func tagFor(s string) string {
	if s == "" {
		return "unknown"
	}
	b := []byte(s)
	if len(b) > 128 {
		b = b[:128]
	}
	for i, c := range b {
		word := c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !word && (i == 0 || c != '.' && c != '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

// Image describes the image to write.
type Image struct {
	// Ref names the image, with a tag: "localhost/airlock:5ad6729". A short
	// name is normalized as Docker does ("airlock:1" is docker.io/library/airlock:1).
	Ref string
	// OS and Architecture are the image's platform in Go's names ("linux", "amd64").
	OS, Architecture string
	// Entrypoint and Cmd are those of the image config; either may be empty.
	Entrypoint, Cmd []string
	// Files make up the image's only layer. Directories leading to them are
	// added with mode 0755.
	Files []File
}

// File is one regular file of the layer.
type File struct {
	// Path is its absolute path in the image, "/airlock".
	Path string
	// Mode holds its permission bits (0755); other bits are an error.
	Mode fs.FileMode
	// Data is its content.
	Data []byte
}

// Written describes an archive Write wrote.
type Written struct {
	// Ref is the image's normalized reference ("localhost/airlock:5ad6729").
	Ref string
	// ID is the digest of the image config, "sha256:…": the image ID Docker
	// shows with its classic image store.
	ID string
	// Manifest is the digest of the image manifest, "sha256:…": the image ID
	// with the containerd image store, the digest containerd shows.
	Manifest string
	// DiffID is the digest of the uncompressed layer, "sha256:…".
	DiffID string
	// Size is the archive's size in bytes.
	Size int64
}

// Media types of the OCI image layout.
const (
	mediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	mediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	mediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar"
)

// Annotations naming an image in an OCI index: containerd's full name, and
// the OCI tag (as docker save writes them).
const (
	annotationImageName = "io.containerd.image.name"
	annotationRefName   = "org.opencontainers.image.ref.name"
)

// epoch is the modification and creation time of everything written.
var epoch = time.Unix(0, 0).UTC()

// descriptor is an OCI content descriptor.
type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *platform         `json:"platform,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// config is the image config (the OCI image config, which Docker reads).
type config struct {
	Created      string `json:"created"`
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Config       struct {
		Entrypoint []string `json:"Entrypoint,omitempty"`
		Cmd        []string `json:"Cmd,omitempty"`
	} `json:"config"`
	RootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
	History []history `json:"history"`
}

type history struct {
	Created   string `json:"created"`
	CreatedBy string `json:"created_by"`
}

type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        descriptor   `json:"config"`
	Layers        []descriptor `json:"layers"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []descriptor `json:"manifests"`
}

// dockerManifest is an entry of a Docker image archive's manifest.json.
type dockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// Write writes the archive of img to w.
func Write(w io.Writer, img Image) (Written, error) {
	named, err := reference.ParseNormalizedNamed(img.Ref)
	if err != nil {
		return Written{}, fmt.Errorf("cannot use image reference %q: %w", img.Ref, err)
	}
	tagged, ok := named.(reference.NamedTagged)
	if !ok {
		return Written{}, fmt.Errorf("cannot use image reference %q: it has no tag", img.Ref)
	}
	if _, digested := named.(reference.Digested); digested {
		return Written{}, fmt.Errorf("cannot use image reference %q: it has a digest", img.Ref)
	}
	if img.OS == "" || img.Architecture == "" {
		return Written{}, errors.New("cannot write an image without OS and architecture")
	}
	// docker load takes the familiar name: "airlock:1", not docker.io/library/airlock:1.
	familiar := reference.FamiliarString(tagged)

	layer, err := layerTar(img.Files)
	if err != nil {
		return Written{}, err
	}
	diffID := digest(layer)

	var cfg config
	cfg.Created = epoch.Format(time.RFC3339)
	cfg.Architecture, cfg.OS = img.Architecture, img.OS
	cfg.Config.Entrypoint, cfg.Config.Cmd = img.Entrypoint, img.Cmd
	cfg.RootFS.Type = "layers"
	cfg.RootFS.DiffIDs = []string{diffID}
	cfg.History = []history{{Created: cfg.Created, CreatedBy: "imagetar"}}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return Written{}, fmt.Errorf("cannot encode the image config: %w", err)
	}
	cfgDesc := descriptor{MediaType: mediaTypeConfig, Digest: digest(cfgJSON), Size: int64(len(cfgJSON))}
	layerDesc := descriptor{MediaType: mediaTypeLayer, Digest: diffID, Size: int64(len(layer))}

	mfJSON, err := json.Marshal(manifest{SchemaVersion: 2, MediaType: mediaTypeManifest, Config: cfgDesc, Layers: []descriptor{layerDesc}})
	if err != nil {
		return Written{}, fmt.Errorf("cannot encode the image manifest: %w", err)
	}
	mfDesc := descriptor{
		MediaType: mediaTypeManifest, Digest: digest(mfJSON), Size: int64(len(mfJSON)),
		Annotations: map[string]string{annotationImageName: tagged.String(), annotationRefName: tagged.Tag()},
		Platform:    &platform{Architecture: img.Architecture, OS: img.OS},
	}
	idxJSON, err := json.Marshal(index{SchemaVersion: 2, MediaType: mediaTypeIndex, Manifests: []descriptor{mfDesc}})
	if err != nil {
		return Written{}, fmt.Errorf("cannot encode the image index: %w", err)
	}
	dockerJSON, err := json.Marshal([]dockerManifest{{
		Config: blobPath(cfgDesc.Digest), RepoTags: []string{familiar}, Layers: []string{blobPath(diffID)},
	}})
	if err != nil {
		return Written{}, fmt.Errorf("cannot encode manifest.json: %w", err)
	}

	entries := map[string][]byte{
		blobPath(cfgDesc.Digest): cfgJSON,
		blobPath(diffID):         layer,
		blobPath(mfDesc.Digest):  mfJSON,
		"index.json":             idxJSON,
		"manifest.json":          dockerJSON,
		"oci-layout":             []byte(`{"imageLayoutVersion":"1.0.0"}`),
	}
	cw := &countingWriter{w: w}
	tw := tar.NewWriter(cw)
	names := []string{"blobs/", "blobs/sha256/"}
	for name := range entries {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if strings.HasSuffix(name, "/") {
			err = tw.WriteHeader(header(tar.TypeDir, name, 0o755, 0))
		} else {
			err = writeFile(tw, name, 0o644, entries[name])
		}
		if err != nil {
			return Written{}, fmt.Errorf("cannot write the image archive: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return Written{}, fmt.Errorf("cannot write the image archive: %w", err)
	}
	return Written{Ref: tagged.String(), ID: cfgDesc.Digest, Manifest: mfDesc.Digest, DiffID: diffID, Size: cw.n}, nil
}

// layerTar returns the layer holding files, and the directories leading to
// them, in sorted order.
func layerTar(files []File) ([]byte, error) {
	if len(files) == 0 {
		return nil, errors.New("cannot write an image without files")
	}
	byName := map[string]File{}
	dirs := map[string]bool{}
	for _, f := range files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" {
			return nil, fmt.Errorf("cannot add %q to the image: want a clean absolute file path", f.Path)
		}
		if f.Mode&^fs.ModePerm != 0 {
			return nil, fmt.Errorf("cannot add %s to the image: mode %v is not a regular file's permissions", f.Path, f.Mode)
		}
		name := f.Path[1:]
		if _, dup := byName[name]; dup {
			return nil, fmt.Errorf("cannot add %s to the image twice", f.Path)
		}
		byName[name] = f
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	var names []string
	for name := range byName {
		if dirs[name] {
			return nil, fmt.Errorf("cannot add /%s to the image: it is also a directory of another file", name)
		}
		names = append(names, name)
	}
	for d := range dirs {
		names = append(names, d)
	}
	// A directory sorts before what it holds: its name is their prefix.
	slices.Sort(names)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range names {
		var err error
		if dirs[name] {
			err = tw.WriteHeader(header(tar.TypeDir, name+"/", 0o755, 0))
		} else {
			f := byName[name]
			err = writeFile(tw, name, int64(f.Mode), f.Data)
		}
		if err != nil {
			return nil, fmt.Errorf("cannot write the image layer: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("cannot write the image layer: %w", err)
	}
	return buf.Bytes(), nil
}

// header is a tar header owned by root with modification time 0.
func header(typ byte, name string, mode, size int64) *tar.Header {
	return &tar.Header{Typeflag: typ, Name: name, Mode: mode, Size: size, ModTime: epoch}
}

func writeFile(tw *tar.Writer, name string, mode int64, data []byte) error {
	if err := tw.WriteHeader(header(tar.TypeReg, name, mode, int64(len(data)))); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// blobPath is where the OCI image layout keeps the blob with digest d.
func blobPath(d string) string { return "blobs/sha256/" + strings.TrimPrefix(d, "sha256:") }

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
