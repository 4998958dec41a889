package kube

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/manifest"
)

// TestPodStartBound: sandbox.ready_timeout bounds a Pod's start (60 s when the
// manifest gives none), and a Pod that did not run in time is described by
// what keeps it: the scheduler's message, else a container's waiting reason.
func TestPodStartBound(t *testing.T) {
	t.Parallel()
	r := &manifest.Resolved{}
	if d, err := backend.ReadyTimeout(r); err != nil || d != 60*time.Second {
		t.Errorf("the Pod's start bound without ready_timeout = %v, %v; want 60s", d, err)
	}
	r.Sandbox.ReadyTimeout = "7s"
	if d, err := backend.ReadyTimeout(r); err != nil || d != 7*time.Second {
		t.Errorf("the Pod's start bound with ready_timeout 7s = %v, %v", d, err)
	}
	cases := []struct {
		name string
		st   corev1.PodStatus
		want string
	}{
		{"unschedulable", corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."}}}, "not scheduled: 0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."},
		{"image pull", corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "sandbox", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image \"big:1\""}}}}}, `container sandbox is waiting: ImagePullBackOff: Back-off pulling image "big:1"`},
		{"init container first", corev1.PodStatus{Phase: corev1.PodPending,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "svc-db", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}, "container svc-db is waiting: ContainerCreating"},
		{"service not healthy", corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "airlock-install", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}}, {Name: ServicePrefix + "db", Started: new(bool), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
			ContainerStatuses:     []corev1.ContainerStatus{{Name: "sandbox", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}}, "service db runs but has not passed its healthcheck"},
		{"nothing said", corev1.PodStatus{Phase: corev1.PodPending}, "it is pending"},
	}
	for _, c := range cases {
		if got := whyPending(&corev1.Pod{Status: c.st}); got != c.want {
			t.Errorf("%s: whyPending = %q, want %q", c.name, got, c.want)
		}
	}
}
