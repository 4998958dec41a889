// Command etcd is the etcd server of the version named in go.mod, built by scripts/kube.sh
// for its single-node Kubernetes; it is a module of its own so the airlock module never
// depends on etcd.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
