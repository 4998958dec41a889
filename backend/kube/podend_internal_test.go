package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestTakenAway: why the cluster took a sandbox's Pod away, from the Pod's
// status as Kubernetes 1.34 writes it (the DisruptionTarget condition of the
// taint manager, of the Eviction API, of the kubelet; the kubelet's Evicted
// reason) and the taints of its node when they could be read; "" for a Pod
// that runs, ended by itself or is being deleted by someone.
func TestTakenAway(t *testing.T) {
	disruption := func(reason, msg string) corev1.PodCondition {
		return corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: reason, Message: msg}
	}
	pod := func(node string, conds ...corev1.PodCondition) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: conds}}
	}
	tainted := func(keys ...string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "airlock-node2"}}
		for _, k := range keys {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: k, Effect: corev1.TaintEffectNoSchedule},
				corev1.Taint{Key: k, Effect: corev1.TaintEffectNoExecute})
		}
		return n
	}
	byTaints := disruption("DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint")
	evictedByKubelet := pod("localhost")
	evictedByKubelet.Status.Phase, evictedByKubelet.Status.Reason = corev1.PodFailed, "Evicted"
	evictedByKubelet.Status.Message = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 90Mi."
	deleting := pod("localhost")
	deleting.DeletionTimestamp = &metav1.Time{}
	notNow := disruption("EvictionByEvictionAPI", "Eviction API: evicting")
	notNow.Status = corev1.ConditionFalse
	for _, c := range []struct {
		name string
		pod  *corev1.Pod
		node *corev1.Node
		want string
	}{
		{"lost node", pod("airlock-node2", byTaints), tainted("node.kubernetes.io/unreachable"),
			"evicted from node airlock-node2: the node stopped answering (node.kubernetes.io/unreachable)"},
		{"node not ready", pod("airlock-node2", byTaints), tainted("node.kubernetes.io/not-ready"),
			"evicted from node airlock-node2: the node is not ready (node.kubernetes.io/not-ready)"},
		{"other NoExecute taint", pod("airlock-node2", byTaints), tainted("dedicated"),
			"evicted from node airlock-node2: a NoExecute taint dedicated"},
		{"node unreadable", pod("airlock-node2", byTaints), nil,
			"evicted from node airlock-node2 by a NoExecute taint (the node lost, or tainted)"},
		{"node back already", pod("airlock-node2", byTaints), tainted(),
			"evicted from node airlock-node2 by a NoExecute taint (the node lost, or tainted)"},
		{"Eviction API", pod("airlock-node2", disruption("EvictionByEvictionAPI", "Eviction API: evicting")), nil,
			"evicted from node airlock-node2 through the Eviction API (a drain, say)"},
		{"kubelet's eviction", evictedByKubelet, nil,
			"evicted from node localhost by its kubelet: The node was low on resource: memory. Threshold quantity: 100Mi, available: 90Mi."},
		{"kubelet's condition", pod("localhost", disruption("TerminationByKubelet", "The node was low on resource: ephemeral-storage.")), nil,
			"evicted from node localhost by its kubelet: The node was low on resource: ephemeral-storage."},
		{"preempted", pod("localhost", disruption("PreemptionByScheduler", "default-scheduler: preempting to accommodate a higher priority pod")), nil,
			"preempted on node localhost: default-scheduler: preempting to accommodate a higher priority pod"},
		{"garbage collected", pod("airlock-node2", disruption("DeletionByPodGC", "PodGC: node no longer exists")), nil,
			"deleted from node airlock-node2 by the Pod garbage collector: PodGC: node no longer exists"},
		{"another reason", pod("localhost", disruption("SomethingNew", "why")), nil,
			"taken away from node localhost (SomethingNew: why)"},
		{"never scheduled", pod("", disruption("EvictionByEvictionAPI", "Eviction API: evicting")), nil,
			"evicted before it had a node through the Eviction API (a drain, say)"},
		{"condition not true", pod("localhost", notNow), nil, ""},
		{"running", pod("localhost"), nil, ""},
		{"deleted by someone", deleting, nil, ""},
	} {
		if got := takenAway(c.pod, c.node); got != c.want {
			t.Errorf("%s: takenAway = %q, want %q", c.name, got, c.want)
		}
	}
}
