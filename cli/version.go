package cli

// Version and BuildID are set at link time by the Makefile:
//
//	-ldflags "-X github.com/airlock-dev/airlock/cli.Version=… -X github.com/airlock-dev/airlock/cli.BuildID=…"
var (
	Version = "0.1.0-dev"
	BuildID = "unknown"
)
