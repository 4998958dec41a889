package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Why the cluster took a sandbox's Pod away under it: Kubernetes 1.34 marks
// such a Pod with a DisruptionTarget condition (its reason says who) before it
// deletes it; the kubelet's node-pressure eviction fails it with reason
// Evicted.

// The taints of a lost node (NoExecute, added by the node controller).
const (
	taintUnreachable = "node.kubernetes.io/unreachable"
	taintNotReady    = "node.kubernetes.io/not-ready"
)

// takenAway says why the cluster took Pod p away: "evicted from node N: the
// node stopped answering (node.kubernetes.io/unreachable)", say; "" when it
// did not (it runs, its primary ended by itself, someone deletes it). node is
// p's node when it could be read (its NoExecute taints say why the taint
// manager evicted p), nil otherwise.
func takenAway(p *corev1.Pod, node *corev1.Node) string {
	on := "from node " + p.Spec.NodeName
	if p.Spec.NodeName == "" {
		on = "before it had a node"
	}
	for _, c := range p.Status.Conditions {
		if c.Type != corev1.DisruptionTarget || c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Reason {
		case "DeletionByTaintManager":
			return "evicted " + on + noExecuteWhy(node)
		case "EvictionByEvictionAPI":
			return "evicted " + on + " through the Eviction API (a drain, say)"
		case "TerminationByKubelet":
			return "evicted " + on + " by its kubelet: " + c.Message
		case "PreemptionByScheduler":
			return "preempted " + onNode(p) + ": " + c.Message
		case "DeletionByPodGC":
			return "deleted " + on + " by the Pod garbage collector: " + c.Message
		default:
			return fmt.Sprintf("taken away %s (%s: %s)", on, c.Reason, c.Message)
		}
	}
	if p.Status.Phase == corev1.PodFailed && p.Status.Reason == "Evicted" {
		return "evicted " + on + " by its kubelet: " + p.Status.Message
	}
	return ""
}

func onNode(p *corev1.Pod) string {
	if p.Spec.NodeName == "" {
		return "before it had a node"
	}
	return "on node " + p.Spec.NodeName
}

// noExecuteWhy names the NoExecute taint of node behind a taint manager's
// eviction.
func noExecuteWhy(node *corev1.Node) string {
	if node != nil {
		var other string
		for _, t := range node.Spec.Taints {
			if t.Effect != corev1.TaintEffectNoExecute {
				continue
			}
			switch t.Key {
			case taintUnreachable:
				return ": the node stopped answering (" + taintUnreachable + ")"
			case taintNotReady:
				return ": the node is not ready (" + taintNotReady + ")"
			}
			if other == "" {
				other = t.Key
			}
		}
		if other != "" {
			return ": a NoExecute taint " + other
		}
	}
	return " by a NoExecute taint (the node lost, or tainted)"
}

// whyTakenAway is takenAway with p's node read from the cluster when its taints
// tell why (a user who may not read Nodes gets the reason without them).
func (rt *Runtime) whyTakenAway(ctx context.Context, p *corev1.Pod) string {
	var node *corev1.Node
	if takenAway(p, nil) != "" && p.Spec.NodeName != "" && byTaints(p) {
		n := &corev1.Node{}
		if err := rt.core.Get().Resource("nodes").Name(p.Spec.NodeName).Do(ctx).Into(n); err == nil {
			node = n
		}
	}
	return takenAway(p, node)
}

func byTaints(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == "DeletionByTaintManager" {
			return true
		}
	}
	return false
}
