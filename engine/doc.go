// Package engine finds the Docker Engine the docker CLI would use (DOCKER_HOST, contexts) without
// reaching it; package engine/dial opens Engine API clients to it, so that what only resolves (the
// command line) is built without the Engine client.
//
// Its Endpoint is what the daemon's API and store carry of where a sandbox runs: a Docker Engine,
// or a Kubernetes cluster as a typed Kubernetes (package engine/kubecontext makes it). Normalize
// reads a cluster packed in Host as earlier versions sent and recorded it (kubernetes.go).
//
// Library choice: the docker CLI's own packages, github.com/docker/cli v28.5.2+incompatible,
// the release that matches the github.com/docker/docker v28.5.2 Engine client. They build beside
// it and add only three small modules (logrus, fvbommel/sortorder, moby/sys/sequential).
// cli/context/store and cli/context read the context store exactly as `docker context`
// writes it, opts.ParseHost normalises DOCKER_HOST as the CLI does, and cli/connhelper (in dial) reaches
// ssh:// Engines through `ssh -- host docker system dial-stdio`, as the CLI does. Only the
// `currentContext` field of config.json is read here, to avoid the credential-helper tree of cli/config.
package engine
