package docker

// objectName is the Docker name of a sandbox's primary container and network.
func objectName(id string) string { return "airlock-" + id }
