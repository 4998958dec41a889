// Package engine finds the Docker Engine the docker CLI would use and opens Engine API clients to it.
//
// Library choice: the docker CLI's own packages, github.com/docker/cli v28.5.2+incompatible,
// the release that matches the github.com/docker/docker v28.5.2 Engine client. They build beside
// it and add only three small modules (logrus, fvbommel/sortorder, moby/sys/sequential).
// cli/context/store and cli/context/docker read the context store exactly as `docker context`
// writes it, opts.ParseHost normalises DOCKER_HOST as the CLI does, and cli/connhelper reaches
// ssh:// Engines through `ssh -- host docker system dial-stdio`, as the CLI does. Only the
// `currentContext` field of config.json is read here, to avoid the credential-helper tree of cli/config.
package engine
