// Command egresssteps times, on the Engine, the calls a sandbox with egress
// rules makes for its network and its proxy (scripts/bench-egress.sh -steps):
// where the time of an egress run goes, step by step, medians of -runs.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"

	"github.com/airlock-dev/airlock/test/testenv"
)

func main() {
	runs := flag.Int("runs", 7, "rounds")
	flag.Parse()
	if err := run(*runs); err != nil {
		fmt.Fprintln(os.Stderr, "egresssteps:", err)
		os.Exit(1)
	}
}

func run(runs int) error {
	ctx := context.Background()
	cli, img, err := testenv.BusyboxClient(ctx)
	if err != nil {
		return err
	}
	steps := map[string][]time.Duration{}
	var order []string
	t := func(name string, f func() error) error {
		s := time.Now()
		err := f()
		if _, ok := steps[name]; !ok {
			order = append(order, name)
		}
		steps[name] = append(steps[name], time.Since(s))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	// A long-lived container standing for a shared proxy.
	shared, err := cli.ContainerCreate(ctx, &container.Config{Image: img, Cmd: []string{"sleep", "3600"}}, &container.HostConfig{}, nil, nil, "")
	if err != nil {
		return err
	}
	defer cli.ContainerRemove(context.WithoutCancel(ctx), shared.ID, container.RemoveOptions{Force: true})
	if err := cli.ContainerStart(ctx, shared.ID, container.StartOptions{}); err != nil {
		return err
	}
	for i := 0; i < runs; i++ {
		name := fmt.Sprintf("airlock-egresssteps-%d-%d", os.Getpid(), i)
		var proxy, primary string
		steps := []struct {
			n string
			f func() error
		}{
			{"network create (internal)", func() error {
				_, err := cli.NetworkCreate(ctx, name, network.CreateOptions{Driver: "bridge", Internal: true, Options: map[string]string{"com.docker.network.bridge.inhibit_ipv4": "true"}})
				return err
			}},
			{"proxy container create", func() error {
				c, err := cli.ContainerCreate(ctx, &container.Config{Image: img, Cmd: []string{"sleep", "3600"}}, &container.HostConfig{NetworkMode: "bridge"}, nil, nil, name+"-egress")
				proxy = c.ID
				return err
			}},
			{"proxy NetworkConnect (created)", func() error {
				return cli.NetworkConnect(ctx, name, proxy, &network.EndpointSettings{Aliases: []string{"airlock-egress"}})
			}},
			{"proxy start", func() error { return cli.ContainerStart(ctx, proxy, container.StartOptions{}) }},
			{"proxy inspect", func() error { _, err := cli.ContainerInspect(ctx, proxy); return err }},
			{"NetworkConnect of a running container (shared proxy)", func() error {
				return cli.NetworkConnect(ctx, name, shared.ID, nil)
			}},
			{"primary create+start on the internal network", func() error {
				c, err := cli.ContainerCreate(ctx, &container.Config{Image: img, Cmd: []string{"true"}}, &container.HostConfig{NetworkMode: container.NetworkMode(name)}, nil, nil, "")
				if err != nil {
					return err
				}
				primary = c.ID
				return cli.ContainerStart(ctx, primary, container.StartOptions{})
			}},
			{"teardown: primary remove", func() error {
				return cli.ContainerRemove(ctx, primary, container.RemoveOptions{Force: true})
			}},
			{"teardown: proxy remove (force)", func() error {
				return cli.ContainerRemove(ctx, proxy, container.RemoveOptions{Force: true})
			}},
			{"teardown: NetworkDisconnect (shared proxy)", func() error {
				return cli.NetworkDisconnect(ctx, name, shared.ID, true)
			}},
			{"teardown: network remove", func() error { return cli.NetworkRemove(ctx, name) }},
			{"primary create+start on airlock-shared (plain run's)", func() error {
				c, err := cli.ContainerCreate(ctx, &container.Config{Image: img, Cmd: []string{"true"}}, &container.HostConfig{NetworkMode: "airlock-shared"}, nil, nil, "")
				if err != nil {
					return err
				}
				defer cli.ContainerRemove(context.WithoutCancel(ctx), c.ID, container.RemoveOptions{Force: true})
				return cli.ContainerStart(ctx, c.ID, container.StartOptions{})
			}},
		}
		for _, s := range steps {
			if err := t(s.n, s.f); err != nil {
				return err
			}
		}
	}
	for _, n := range order {
		d := steps[n]
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		fmt.Printf("%-55s %6.1f ms (median of %d)\n", n, float64(d[len(d)/2])/1e6, len(d))
	}
	return nil
}
