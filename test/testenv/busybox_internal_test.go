package testenv

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
)

func TestBusyboxContextRejectsMissingOrDynamicBinary(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{"/nonexistent/busybox", "cannot read /nonexistent/busybox"},
		{"/bin/ls", "dynamically linked"}, // Debian's coreutils ls is dynamic
	} {
		_, err := busyboxContext(tc.path)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("busyboxContext(%s) = %v, want an error containing %q", tc.path, err, tc.want)
		}
	}
}

func TestBusyboxContextIsDeterministic(t *testing.T) {
	a, err := busyboxContext(hostBusybox)
	if err != nil {
		t.Fatal(err)
	}
	b, err := busyboxContext(hostBusybox)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("two build contexts from the same inputs differ")
	}

	want := map[string]string{
		"Dockerfile":         "file 644",
		"rootfs/bin/busybox": "file 755",
		"rootfs/bin/sh":      "link /bin/busybox",
		"rootfs/bin/httpd":   "link /bin/busybox",
		"rootfs/etc/passwd":  "file 644",
		"rootfs/etc/group":   "file 644",
		"rootfs/tmp/":        "dir 1777",
	}
	tr := tar.NewReader(bytes.NewReader(a))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		w, ok := want[h.Name]
		if !ok {
			continue
		}
		delete(want, h.Name)
		var got string
		switch h.Typeflag {
		case tar.TypeReg:
			got = "file " + strconv.FormatInt(h.Mode, 8)
		case tar.TypeDir:
			got = "dir " + strconv.FormatInt(h.Mode, 8)
		case tar.TypeSymlink:
			got = "link " + h.Linkname
		}
		if got != w {
			t.Errorf("%s: %s, want %s", h.Name, got, w)
		}
	}
	for name := range want {
		t.Errorf("build context lacks %s", name)
	}
}
