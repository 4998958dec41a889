//go:build kube

package kube_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/airlock-dev/airlock/test/testenv"
)

// The gateway of each node's Pod bridge, where its Pods reach the API server
// (scripts/kube.sh: a proxy to 127.0.0.1:6443).
var gateways = map[string]string{"localhost": "10.244.0.1", node2: "10.244.1.1"}

// TestPodNetwork: Pods reach each other by Pod IP on one node and across the
// two (the host forwards between the bridges: scripts/kube.sh's rule in
// DOCKER-USER), and reach the API server at their bridge's gateway: an HTTPS
// request with the Pod's ServiceAccount token gets the API's answer naming
// that account. From the host, each gateway serves the API with a
// certificate the cluster's CA vouches for at that address.
func TestPodNetwork(t *testing.T) {
	cs := clientset(t)
	rc := restConfig(t)
	needTwoNodes(t, cs)
	ensureNamespace(t, cs)
	ctx := context.Background()

	// The host: a verified TLS connection to each gateway, and the API's version.
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(rc.TLSClientConfig.CAData) {
		t.Fatalf("no CA certificate in the kubeconfig %s", kubeconfig)
	}
	for _, node := range []string{"localhost", node2} {
		gw := gateways[node]
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: gw}}}
		resp, err := hc.Get("https://" + gw + ":6443/version")
		if err != nil {
			t.Fatalf("the API at node %s's gateway, from the host, verified for %s: %v", node, gw, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"gitVersion"`) {
			t.Errorf("GET https://%s:6443/version: %s\n%s", gw, resp.Status, body)
		}
	}

	// The namespace's ServiceAccount "default", whose token the Pods get.
	testenv.Eventually(t, time.Minute, "ServiceAccount default in namespace "+namespace, func() bool {
		_, err := cs.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})

	// a and c on node 1, b on node 2, each serving a page naming itself.
	suffix := fmt.Sprint(time.Now().UnixNano() % 1e9)
	pods := []struct{ name, node string }{{"net-a-" + suffix, "localhost"}, {"net-b-" + suffix, node2}, {"net-c-" + suffix, "localhost"}}
	t.Cleanup(func() {
		zero := int64(0)
		for _, p := range pods {
			_ = cs.CoreV1().Pods(namespace).Delete(context.Background(), p.name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}
		testenv.Eventually(t, time.Minute, "the test's Pods to be gone", func() bool {
			for _, p := range pods {
				if _, err := cs.CoreV1().Pods(namespace).Get(context.Background(), p.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return false
				}
			}
			return true
		})
	})
	start := time.Now()
	for _, p := range pods {
		if _, err := cs.CoreV1().Pods(namespace).Create(ctx, webPod(p.name, p.node), metav1.CreateOptions{}); err != nil {
			t.Fatalf("cannot create Pod %s: %v", p.name, err)
		}
	}
	ip := map[string]string{}
	for _, p := range pods {
		testenv.Eventually(t, 2*time.Minute, "Pod "+p.name+" to be ready on "+p.node, func() bool {
			got, err := cs.CoreV1().Pods(namespace).Get(ctx, p.name, metav1.GetOptions{})
			if err != nil || got.Status.PodIP == "" {
				return false
			}
			for _, c := range got.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					if got.Spec.NodeName != p.node {
						t.Fatalf("Pod %s runs on %s, want %s", p.name, got.Spec.NodeName, p.node)
					}
					ip[p.name] = got.Status.PodIP
					return true
				}
			}
			return false
		})
	}
	t.Logf("Pods ready in %.1f s: %v", time.Since(start).Seconds(), ip)
	for _, p := range pods {
		if _, subnet, _ := net.ParseCIDR(gateways[p.node] + "/24"); !subnet.Contains(net.ParseIP(ip[p.name])) {
			t.Errorf("Pod %s on %s has address %s, not in its bridge's subnet %s", p.name, p.node, ip[p.name], subnet)
		}
	}
	a, b, c := pods[0], pods[1], pods[2]

	// Pod to Pod by Pod IP: across the nodes both ways, and on node 1.
	for _, hop := range []struct{ from, to struct{ name, node string } }{{a, b}, {b, a}, {c, a}} {
		url := "http://" + ip[hop.to.name] + ":8080/"
		out, errOut, err := podExec(t, rc, cs, hop.from.name, "timeout", "10", "wget", "-q", "-O-", url)
		want := hop.to.name + " on " + hop.to.node + "\n"
		if err != nil || out != want {
			// (exit code 143: wget got no answer within 10 s)
			t.Errorf("%s (on %s) fetching %s from %s (on %s): want %q, got %q, %v %s",
				hop.from.name, hop.from.node, url, hop.to.name, hop.to.node, want, out, err, errOut)
		}
	}

	// The API from a Pod of each node: who am I, with the Pod's token.
	const whoami = `timeout 10 wget -q -O- --no-check-certificate ` +
		`--header "Authorization: Bearer $(cat /var/run/secrets/kubernetes.io/serviceaccount/token)" ` +
		`--header "Content-Type: application/json" ` +
		`--post-data '{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}' ` +
		`"https://$1:6443/apis/authentication.k8s.io/v1/selfsubjectreviews"`
	wantUser := "system:serviceaccount:" + namespace + ":default"
	for _, p := range []struct{ name, node string }{a, b} {
		gw := gateways[p.node]
		out, errOut, err := podExec(t, rc, cs, p.name, "sh", "-c", whoami, "sh", gw)
		var review authenticationv1.SelfSubjectReview
		if err != nil || json.Unmarshal([]byte(out), &review) != nil || review.Status.UserInfo.Username != wantUser {
			t.Errorf("%s (on %s) asking the API at https://%s:6443 who it is: want %s, got %q, %v %s", p.name, p.node, gw, wantUser, out, err, errOut)
			continue
		}
		t.Logf("%s (on %s) at https://%s:6443: the API says %s", p.name, p.node, gw, review.Status.UserInfo.Username)
	}
}

// webPod is a Pod on node serving a page "NAME on NODE" on port 8080, ready
// once it serves it.
func webPod(name, node string) *corev1.Pod {
	zero := int64(0)
	field := func(env, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: env, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"airlock-e2e": "pod-network"}},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{"kubernetes.io/hostname": node},
			TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{
				Name:            "web",
				Image:           busybox,
				ImagePullPolicy: corev1.PullNever,
				Command:         []string{"sh", "-c", `mkdir -p /tmp/www && echo "$POD_NAME on $NODE_NAME" > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www`},
				Env:             []corev1.EnvVar{field("POD_NAME", "metadata.name"), field("NODE_NAME", "spec.nodeName")},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}},
					PeriodSeconds: 1,
				},
			}},
		},
	}
}

// restConfig is the test cluster's client configuration (the admin's).
func restConfig(t *testing.T) *rest.Config {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// podExec runs cmd in the container "web" of a Pod of the namespace and
// returns its stdout and stderr; a non-zero exit is an error.
func podExec(t *testing.T, rc *rest.Config, cs kubernetes.Interface, pod string, cmd ...string) (string, string, error) {
	t.Helper()
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "web", Command: cmd, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(rc, "POST", req.URL())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut})
	return out.String(), errOut.String(), err
}
