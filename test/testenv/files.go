package testenv

import (
	"archive/tar"
	"context"
	"io"
	"os"
	"testing"

	"github.com/docker/docker/client"
)

// ReadContainerFile returns a file of a container (running or stopped) through the
// Engine's archive API, or "" when it cannot be read.
func ReadContainerFile(ctx context.Context, cli client.APIClient, container, path string) string {
	rc, _, err := cli.CopyFromContainer(ctx, container, path)
	if err != nil {
		return ""
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	if _, err := tr.Next(); err != nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(tr, 16<<20))
	return string(b)
}

// CopyFile copies the file src to dst, made or truncated with mode (an
// executable of the test's own, say).
func CopyFile(t testing.TB, src, dst string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
