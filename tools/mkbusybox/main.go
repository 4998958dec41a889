// Command mkbusybox builds the local busybox test image through the Engine API and
// tags it with the names given as arguments (make demo uses it for the examples).
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/airlock-dev/airlock/test/testenv"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mkbusybox:", err)
		os.Exit(1)
	}
}

func run(tags []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cli, err := testenv.NewClient(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	ref, err := testenv.BuildBusyboxImage(ctx, cli)
	if err != nil {
		return err
	}
	for _, t := range tags {
		if err := cli.ImageTag(ctx, ref, t); err != nil {
			return fmt.Errorf("cannot tag %s as %s: %w", ref, t, err)
		}
	}
	fmt.Println(ref)
	return nil
}
