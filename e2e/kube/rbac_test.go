//go:build kube

package kube_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestMissingRightOnCluster: a user whose Role lets it read Pods but not create
// them (and nothing of namespaces) runs `airlock run`: it fails in under 5 s
// with exit 125 and the API server's message, which names the verb and the
// resource it lacks, and leaves nothing.
func TestMissingRightOnCluster(t *testing.T) {
	e, cs := newEnv(t, "[sandbox]\nimage = \"{{image}}\"\n")
	ctx := context.Background()
	const user = "airlock-e2e-limited"
	ensureNamespace(t, cs)
	if _, err := cs.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: user}}, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}}}
	if _, err := cs.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: user},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: user, Namespace: namespace}}}
	if _, err := cs.RbacV1().RoleBindings(namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	expiry := int64(600)
	tok, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, user, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A kubeconfig for that user, on the test cluster's server.
	admin, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cluster := admin.Clusters[admin.Contexts[admin.CurrentContext].Cluster]
	limited := clientcmdapi.NewConfig()
	limited.Clusters["test"] = cluster
	limited.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	limited.Contexts["limited"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: user, Namespace: namespace}
	limited.CurrentContext = "limited"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*limited, path); err != nil {
		t.Fatal(err)
	}
	appendConfig(t, e, "create_namespace = false\n")
	start := time.Now()
	r := e.RunEnv([]string{"KUBECONFIG=" + path}, "run", "--", "true")
	took := time.Since(start)
	if r.Code != 125 || !strings.Contains(r.Stderr, "forbidden") || !strings.Contains(r.Stderr, "system:serviceaccount:"+namespace+":"+user) {
		t.Errorf("want exit 125 with the API server's refusal for the user, got %s", r)
	}
	if !strings.Contains(r.Stderr, `cannot create resource "pods"`) && !strings.Contains(r.Stderr, `cannot get resource "namespaces"`) {
		t.Errorf("the message does not name the verb and resource missing: %s", r.Stderr)
	}
	if took > 5*time.Second {
		t.Errorf("the missing right took %v to be reported, want under 5 s: %s", took, r)
	}
	if left := projectPods(t, cs, e.Project); len(left) > 0 {
		t.Errorf("Pods left: %s", podNames(left))
	}
}
