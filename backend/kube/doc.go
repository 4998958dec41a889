// Package kube runs sandboxes as Pods on a Kubernetes cluster through its API.
//
// A sandbox is one Pod (BuildPod, a pure mapping): an init container copies the
// supervisor from the airlock image into an emptyDir, each service is a native
// sidecar reachable by its name on 127.0.0.1, and the main container runs the
// supervisor as PID 1 with its spec on the command line. Names of Pods and
// containers are DNS labels made from the sandbox ID and service names
// (PodName, ContainerName).
package kube
