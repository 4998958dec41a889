package kube

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// The backend speaks to the core/v1 API only (Pods, their exec, attach and log,
// Namespaces), through a REST client of its own: client-go's full clientset
// registers every API group at start, which every airlock command would pay.

var (
	coreScheme = runtime.NewScheme()
	coreCodecs = serializer.NewCodecFactory(coreScheme)
	paramCodec = runtime.NewParameterCodec(coreScheme)
)

func init() {
	if err := corev1.AddToScheme(coreScheme); err != nil {
		panic("kube: " + err.Error())
	}
	metav1.AddToGroupVersion(coreScheme, schema.GroupVersion{Version: "v1"})
}

// newCoreClient is a REST client of the core/v1 API of the cluster of rc.
func newCoreClient(rc *rest.Config) (*rest.RESTClient, error) {
	c := *rc
	c.GroupVersion = &corev1.SchemeGroupVersion
	c.APIPath = "/api"
	c.NegotiatedSerializer = coreCodecs.WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return rest.RESTClientFor(&c)
}

// podClient is the Pods of one namespace.
type podClient struct {
	rc *rest.RESTClient
	ns string
}

func (p podClient) Get(ctx context.Context, name string, _ metav1.GetOptions) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	err := p.rc.Get().Namespace(p.ns).Resource("pods").Name(name).Do(ctx).Into(out)
	return out, err
}

func (p podClient) List(ctx context.Context, o metav1.ListOptions) (*corev1.PodList, error) {
	out := &corev1.PodList{}
	err := p.rc.Get().Namespace(p.ns).Resource("pods").VersionedParams(&o, paramCodec).Do(ctx).Into(out)
	return out, err
}

func (p podClient) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	o.Watch = true
	return p.rc.Get().Namespace(p.ns).Resource("pods").VersionedParams(&o, paramCodec).Watch(ctx)
}

func (p podClient) Create(ctx context.Context, pod *corev1.Pod, _ metav1.CreateOptions) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	err := p.rc.Post().Namespace(p.ns).Resource("pods").Body(pod).Do(ctx).Into(out)
	return out, err
}

func (p podClient) Delete(ctx context.Context, name string, o metav1.DeleteOptions) error {
	return p.rc.Delete().Namespace(p.ns).Resource("pods").Name(name).Body(&o).Do(ctx).Error()
}

func (p podClient) Patch(ctx context.Context, name string, pt types.PatchType, data []byte) error {
	return p.rc.Patch(pt).Namespace(p.ns).Resource("pods").Name(name).Body(data).Do(ctx).Error()
}

// Logs is a request for a container's log.
func (p podClient) Logs(name string, o *corev1.PodLogOptions) *rest.Request {
	return p.rc.Get().Namespace(p.ns).Resource("pods").Name(name).SubResource("log").VersionedParams(o, paramCodec)
}

// Sub is a POST to a Pod's subresource (exec, attach) with its options.
func (p podClient) Sub(name, sub string, o runtime.Object) *rest.Request {
	return p.rc.Post().Namespace(p.ns).Resource("pods").Name(name).SubResource(sub).VersionedParams(o, paramCodec)
}

func (rt *Runtime) getNamespace(ctx context.Context) error {
	return rt.core.Get().Resource("namespaces").Name(rt.cfg.Namespace).Do(ctx).Error()
}

func (rt *Runtime) createNamespace(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rt.cfg.Namespace}}
	return rt.core.Post().Resource("namespaces").Body(ns).Do(ctx).Error()
}
