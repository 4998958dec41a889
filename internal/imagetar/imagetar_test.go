package imagetar_test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/imagetar"
)

// entry is one file of a tar.
type entry struct {
	hdr  *tar.Header
	data []byte
}

// readTar returns the entries of a tar by name, and their names in order. It
// fails the test unless every entry is owned by root with modification time 0.
func readTar(t *testing.T, r io.Reader) (map[string]entry, []string) {
	t.Helper()
	tr := tar.NewReader(r)
	entries := map[string]entry{}
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return entries, names
		}
		if err != nil {
			t.Fatalf("cannot read tar: %v", err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("cannot read %s: %v", h.Name, err)
		}
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || h.ModTime.Unix() != 0 {
			t.Errorf("%s: uid %d gid %d uname %q gname %q mtime %v, want root's with mtime 0",
				h.Name, h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime)
		}
		if _, dup := entries[h.Name]; dup {
			t.Errorf("%s appears twice", h.Name)
		}
		entries[h.Name] = entry{h, data}
		names = append(names, h.Name)
	}
}

func sha(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// blob returns the archive entry of the blob with digest d, checking it holds
// what the digest says.
func blob(t *testing.T, entries map[string]entry, d string) []byte {
	t.Helper()
	name := "blobs/sha256/" + strings.TrimPrefix(d, "sha256:")
	e, ok := entries[name]
	if !ok {
		t.Fatalf("no blob %s in the archive", name)
	}
	if got := sha(e.data); got != d {
		t.Fatalf("blob %s holds content of digest %s", name, got)
	}
	return e.data
}

func unmarshal(t *testing.T, what string, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("cannot parse %s: %v\n%s", what, err, data)
	}
}

// writeArchive writes img to a file under t.TempDir() and returns its path.
func writeArchive(t *testing.T, img imagetar.Image) (string, imagetar.Written) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "image.tar")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	w, err := imagetar.Write(f, img)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return out, w
}

func TestWriteDockerArchive(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "airlock")
	content := []byte("#!not really an executable\n" + strings.Repeat("x", 3000))
	if err := os.WriteFile(bin, content, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	out, w := writeArchive(t, imagetar.Image{
		Ref: "localhost/airlock:test-1", OS: "linux", Architecture: "arm64",
		Entrypoint: []string{"/airlock"},
		Files:      []imagetar.File{{Path: "/airlock", Mode: 0o755, Data: data}},
	})
	archive, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if w.Size != int64(len(archive)) {
		t.Errorf("Written.Size = %d, the file has %d bytes", w.Size, len(archive))
	}
	if w.Ref != "localhost/airlock:test-1" {
		t.Errorf("Written.Ref = %q", w.Ref)
	}
	entries, names := readTar(t, bytes.NewReader(archive))
	if !slices.IsSorted(names) {
		t.Errorf("archive entries are not sorted: %q", names)
	}

	// The Docker image archive: manifest.json names the config and the layer.
	var mf []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	unmarshal(t, "manifest.json", entries["manifest.json"].data, &mf)
	if len(mf) != 1 || len(mf[0].Layers) != 1 {
		t.Fatalf("manifest.json = %+v, want one image of one layer", mf)
	}
	if !slices.Equal(mf[0].RepoTags, []string{"localhost/airlock:test-1"}) {
		t.Errorf("RepoTags = %q", mf[0].RepoTags)
	}
	cfgData, ok := entries[mf[0].Config]
	if !ok {
		t.Fatalf("no config %s in the archive", mf[0].Config)
	}
	if id := sha(cfgData.data); id != w.ID || mf[0].Config != "blobs/sha256/"+strings.TrimPrefix(id, "sha256:") {
		t.Errorf("config %s has digest %s, Written.ID is %s", mf[0].Config, id, w.ID)
	}
	var cfg struct {
		Architecture, OS string
		Config           struct{ Entrypoint, Cmd, Env []string }
		RootFS           struct {
			Type    string
			DiffIDs []string `json:"diff_ids"`
		}
	}
	unmarshal(t, "the config", cfgData.data, &cfg)
	if cfg.Architecture != "arm64" || cfg.OS != "linux" {
		t.Errorf("config platform %s/%s, want linux/arm64", cfg.OS, cfg.Architecture)
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{"/airlock"}) || cfg.Config.Cmd != nil || cfg.Config.Env != nil {
		t.Errorf("config %+v, want Entrypoint [/airlock] only", cfg.Config)
	}
	layer, ok := entries[mf[0].Layers[0]]
	if !ok {
		t.Fatalf("no layer %s in the archive", mf[0].Layers[0])
	}
	if cfg.RootFS.Type != "layers" || !slices.Equal(cfg.RootFS.DiffIDs, []string{sha(layer.data)}) || w.DiffID != sha(layer.data) {
		t.Errorf("rootfs %+v, Written.DiffID %s; the layer's digest is %s", cfg.RootFS, w.DiffID, sha(layer.data))
	}

	// The layer holds the file, and only it.
	files, fileNames := readTar(t, bytes.NewReader(layer.data))
	if !slices.Equal(fileNames, []string{"airlock"}) {
		t.Fatalf("layer holds %q, want [airlock]", fileNames)
	}
	f := files["airlock"]
	if f.hdr.Typeflag != tar.TypeReg || f.hdr.Mode != 0o755 || !bytes.Equal(f.data, content) {
		t.Errorf("layer's airlock: type %c mode %o, %d bytes; want a regular file, mode 755, %d bytes",
			f.hdr.Typeflag, f.hdr.Mode, len(f.data), len(content))
	}

	// The OCI image layout over the same blobs, as containerd imports it:
	// oci-layout, then index.json naming the manifest, which names the same
	// config and layer.
	var layout struct{ ImageLayoutVersion string }
	unmarshal(t, "oci-layout", entries["oci-layout"].data, &layout)
	if layout.ImageLayoutVersion != "1.0.0" {
		t.Errorf("oci-layout version %q", layout.ImageLayoutVersion)
	}
	type descriptor struct {
		MediaType   string
		Digest      string
		Size        int64
		Annotations map[string]string
		Platform    *struct{ Architecture, OS string }
	}
	var idx struct {
		SchemaVersion int
		MediaType     string
		Manifests     []descriptor
	}
	unmarshal(t, "index.json", entries["index.json"].data, &idx)
	if idx.SchemaVersion != 2 || idx.MediaType != "application/vnd.oci.image.index.v1+json" || len(idx.Manifests) != 1 {
		t.Fatalf("index.json = %+v", idx)
	}
	md := idx.Manifests[0]
	if md.MediaType != "application/vnd.oci.image.manifest.v1+json" || md.Digest != w.Manifest ||
		md.Annotations["io.containerd.image.name"] != "localhost/airlock:test-1" ||
		md.Annotations["org.opencontainers.image.ref.name"] != "test-1" ||
		md.Platform == nil || md.Platform.Architecture != "arm64" || md.Platform.OS != "linux" {
		t.Errorf("index.json manifest %+v (platform %+v), want the manifest %s named localhost/airlock:test-1 for linux/arm64",
			md, md.Platform, w.Manifest)
	}
	mfData := blob(t, entries, md.Digest)
	if int64(len(mfData)) != md.Size {
		t.Errorf("manifest has %d bytes, index.json says %d", len(mfData), md.Size)
	}
	var m struct {
		SchemaVersion int
		MediaType     string
		Config        descriptor
		Layers        []descriptor
	}
	unmarshal(t, "the manifest", mfData, &m)
	if m.SchemaVersion != 2 || m.MediaType != "application/vnd.oci.image.manifest.v1+json" ||
		m.Config.MediaType != "application/vnd.oci.image.config.v1+json" || m.Config.Digest != w.ID ||
		m.Config.Size != int64(len(cfgData.data)) || len(m.Layers) != 1 ||
		m.Layers[0].MediaType != "application/vnd.oci.image.layer.v1.tar" || m.Layers[0].Digest != w.DiffID ||
		m.Layers[0].Size != int64(len(layer.data)) {
		t.Errorf("manifest %+v does not name the config %s (%d bytes) and the layer %s (%d bytes)",
			m, w.ID, len(cfgData.data), w.DiffID, len(layer.data))
	}
	blob(t, entries, m.Config.Digest)
	blob(t, entries, m.Layers[0].Digest)

	// Nothing else: the blobs directories, three blobs and three files.
	if len(names) != 8 {
		t.Errorf("archive holds %q, want blobs/, blobs/sha256/, 3 blobs, index.json, manifest.json, oci-layout", names)
	}
}

func TestWriteIsDeterministic(t *testing.T) {
	img := imagetar.Image{
		Ref: "example.com/x/y:1", OS: "linux", Architecture: "amd64", Cmd: []string{"run"},
		Files: []imagetar.File{
			{Path: "/usr/bin/b", Mode: 0o755, Data: []byte("b")},
			{Path: "/a", Mode: 0o644, Data: []byte("a")},
			{Path: "/usr/a-b", Mode: 0o600, Data: []byte("c")},
		},
	}
	first, w1 := writeArchive(t, img)
	slices.Reverse(img.Files)
	second, w2 := writeArchive(t, img)
	a, _ := os.ReadFile(first)
	b, _ := os.ReadFile(second)
	if !bytes.Equal(a, b) || w1 != w2 {
		t.Errorf("two archives of the same files differ: %+v, %+v", w1, w2)
	}

	// Directories come before their content, with mode 0755.
	entries, _ := readTar(t, bytes.NewReader(a))
	var mf []struct{ Layers []string }
	unmarshal(t, "manifest.json", entries["manifest.json"].data, &mf)
	files, names := readTar(t, bytes.NewReader(entries[mf[0].Layers[0]].data))
	if want := []string{"a", "usr/", "usr/a-b", "usr/bin/", "usr/bin/b"}; !slices.Equal(names, want) {
		t.Errorf("layer holds %q, want %q", names, want)
	}
	for name, want := range map[string]int64{"a": 0o644, "usr/": 0o755, "usr/a-b": 0o600, "usr/bin/": 0o755, "usr/bin/b": 0o755} {
		if got := files[name].hdr.Mode; got != want {
			t.Errorf("%s has mode %o, want %o", name, got, want)
		}
	}
}

func TestWriteRejectsBadInput(t *testing.T) {
	file := imagetar.File{Path: "/airlock", Mode: 0o755, Data: []byte("x")}
	good := imagetar.Image{Ref: "localhost/airlock:1", OS: "linux", Architecture: "amd64", Files: []imagetar.File{file}}
	for name, tc := range map[string]struct {
		change func(*imagetar.Image)
		want   string
	}{
		"no tag":        {func(i *imagetar.Image) { i.Ref = "localhost/airlock" }, "no tag"},
		"bad ref":       {func(i *imagetar.Image) { i.Ref = "Localhost/Airlock:1" }, "cannot use image reference"},
		"digest":        {func(i *imagetar.Image) { i.Ref += "@sha256:" + strings.Repeat("0", 64) }, "digest"},
		"no platform":   {func(i *imagetar.Image) { i.Architecture = "" }, "architecture"},
		"no files":      {func(i *imagetar.Image) { i.Files = nil }, "without files"},
		"relative path": {func(i *imagetar.Image) { i.Files[0].Path = "airlock" }, "clean absolute"},
		"dot dot":       {func(i *imagetar.Image) { i.Files[0].Path = "/x/../airlock" }, "clean absolute"},
		"root":          {func(i *imagetar.Image) { i.Files[0].Path = "/" }, "clean absolute"},
		"not a file":    {func(i *imagetar.Image) { i.Files[0].Mode |= os.ModeSymlink }, "permissions"},
		"twice":         {func(i *imagetar.Image) { i.Files = append(i.Files, file) }, "twice"},
		"file and dir": {func(i *imagetar.Image) {
			i.Files = append(i.Files, imagetar.File{Path: "/airlock/x", Mode: 0o644})
		}, "also a directory"},
	} {
		t.Run(name, func(t *testing.T) {
			img := good
			img.Files = slices.Clone(good.Files)
			tc.change(&img)
			var buf bytes.Buffer
			_, err := imagetar.Write(&buf, img)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "cannot ") {
				t.Errorf("Write: %v, want an error about %q", err, tc.want)
			}
		})
	}
}

func TestImageRef(t *testing.T) {
	for id, want := range map[string]string{
		"5ad6729":                   "localhost/airlock:5ad6729",
		"5ad6729-dirty.1a2b3c4d":    "localhost/airlock:5ad6729-dirty.1a2b3c4d",
		"v0.2.0":                    "localhost/airlock:v0.2.0",
		"0.1.0-dev+20250101120000":  "localhost/airlock:0.1.0-dev_20250101120000",
		"v0.2.1-0.2025-abc+dirty.x": "localhost/airlock:v0.2.1-0.2025-abc_dirty.x",
		".x":                        "localhost/airlock:_x",
		"":                          "localhost/airlock:unknown",
		strings.Repeat("a", 200):    "localhost/airlock:" + strings.Repeat("a", 128),
	} {
		got := imagetar.ImageRef(id)
		if got != want {
			t.Errorf("ImageRef(%q) = %q, want %q", id, got, want)
		}
		var buf bytes.Buffer
		if _, err := imagetar.Write(&buf, imagetar.Image{Ref: got, OS: "linux", Architecture: "amd64",
			Files: []imagetar.File{{Path: "/a", Mode: 0o755}}}); err != nil {
			t.Errorf("ImageRef(%q) = %q is not a valid reference: %v", id, got, err)
		}
	}
}
