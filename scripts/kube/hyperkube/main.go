// Command hyperkube is one binary holding kube-apiserver, kube-controller-manager,
// kube-scheduler, kubelet and kubectl of the Kubernetes version named in go.mod; it runs the
// component named by argv[0] (a symlink under the component's name) or by its first argument.
// scripts/kube.sh builds it; it is a module of its own so the airlock module never depends
// on Kubernetes.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	_ "time/tzdata"

	"github.com/spf13/cobra"
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

const usage = "usage: hyperkube kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kubectl [flags]"

func main() {
	name, args := filepath.Base(os.Args[0]), os.Args[1:]
	if name == "hyperkube" {
		if len(args) == 0 {
			fmt.Fprintln(os.Stderr, usage)
			os.Exit(2)
		}
		name, args = args[0], args[1:]
	}
	// The components (kubectl's plugin handling above all) read os.Args themselves.
	os.Args = append([]string{name}, args...)
	var cmd *cobra.Command
	switch name {
	case "kube-apiserver":
		cmd = apiserver.NewAPIServerCommand()
	case "kube-controller-manager":
		cmd = controllermanager.NewControllerManagerCommand()
	case "kube-scheduler":
		cmd = scheduler.NewSchedulerCommand()
	case "kubelet":
		cmd = kubelet.NewKubeletCommand(context.Background())
	case "kubectl":
		logs.GlogSetter(kubectl.GetLogVerbosity(os.Args)) //nolint:errcheck
		if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
		os.Exit(0)
	default:
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	cmd.SetArgs(args)
	os.Exit(cli.Run(cmd))
}
