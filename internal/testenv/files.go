package testenv

import (
	"archive/tar"
	"context"
	"io"

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
