package benchdoc

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	dockerclient "github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/client"
)

// PoolSettled waits (untimed) until a project has no sandbox objects but its
// warm pool's, and its pool holds size ready sandboxes: a warm sample starts
// from a full pool, as a loop of runs at its own pace does.
func PoolSettled(ctx context.Context, cli dockerclient.APIClient, c *client.Client, project string, size int) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "dev.airlock.project="+project))})
		if err != nil {
			return err
		}
		others := slices.ContainsFunc(list, func(s container.Summary) bool { return s.Labels["dev.airlock.pool"] == "" })
		if p := PoolOf(ctx, c, project); !others && p.Ready >= size && p.Starting == 0 {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("the project's runs were not removed, or its pool not refilled to %d, within 2 minutes", size)
}

// PoolOf is the warm pool of project, or an empty one.
func PoolOf(ctx context.Context, c *client.Client, project string) client.Pool {
	list, err := c.Pools(ctx)
	if err != nil {
		return client.Pool{}
	}
	for _, p := range list.Pools {
		if p.Project == project {
			return p
		}
	}
	return client.Pool{}
}
