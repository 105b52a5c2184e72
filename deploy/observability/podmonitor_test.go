package observability

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// deployments decodes the Deployments of a multi-document manifest.
func deployments(t *testing.T, path string) []appsv1.Deployment {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []appsv1.Deployment
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		var head struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatal(err)
		}
		if head.Kind != "Deployment" {
			continue
		}
		var d appsv1.Deployment
		if err := yaml.UnmarshalStrict([]byte(doc), &d); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, d)
	}
	return out
}

// metricsPort is the container port whguard serves /metrics on, by
// WHGUARD_METRICS_LISTEN (else WHGUARD_ADMIN_LISTEN).
func metricsPort(c corev1.Container) (int32, error) {
	listen := ""
	for _, e := range c.Env {
		if e.Name == "WHGUARD_ADMIN_LISTEN" && listen == "" {
			listen = e.Value
		}
		if e.Name == "WHGUARD_METRICS_LISTEN" {
			listen = e.Value
		}
	}
	i := strings.LastIndexByte(listen, ':')
	if i < 0 {
		return 0, fmt.Errorf("no metrics listener in %s's environment", c.Name)
	}
	n, err := strconv.Atoi(listen[i+1:])
	return int32(n), err
}

// The PodMonitor is a valid monitoring.coreos.com/v1 object (decoded
// strictly into the operator's own types) that selects the pods of the
// shipped manifests and scrapes whguard's metrics port there.
func TestPodMonitorSelectsTheManifestsPods(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("podmonitor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var pm monitoringv1.PodMonitor
	if err := yaml.UnmarshalStrict(b, &pm); err != nil {
		t.Fatal(err)
	}
	if pm.APIVersion != "monitoring.coreos.com/v1" || pm.Kind != monitoringv1.PodMonitorsKind {
		t.Fatalf("%s %s, want monitoring.coreos.com/v1 PodMonitor", pm.APIVersion, pm.Kind)
	}
	sel, err := metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
	if err != nil || sel.Empty() {
		t.Fatalf("selector %v (%v): it must select the application's pods, not every pod", pm.Spec.Selector, err)
	}
	if len(pm.Spec.PodMetricsEndpoints) != 1 {
		t.Fatalf("%d endpoints, want one: whguard's metrics port", len(pm.Spec.PodMetricsEndpoints))
	}
	ep := pm.Spec.PodMetricsEndpoints[0]
	if ep.Port == nil || ep.Path != "/metrics" {
		t.Fatalf("endpoint port %v, path %q: want a named port and /metrics", ep.Port, ep.Path)
	}
	for _, manifest := range []string{"../sidecar/kubernetes.yaml", "../sidecar/kubernetes-embedded.yaml"} {
		ds := deployments(t, manifest)
		if len(ds) == 0 {
			t.Fatalf("%s: no Deployment", manifest)
		}
		for _, d := range ds {
			if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				t.Errorf("%s: the PodMonitor's selector %s does not select %s's pods (labels %v)", manifest, sel, d.Name, d.Spec.Template.Labels)
				continue
			}
			found := false
			for _, c := range d.Spec.Template.Spec.Containers {
				for _, p := range c.Ports {
					if p.Name != *ep.Port {
						continue
					}
					found = true
					want, err := metricsPort(c)
					if err != nil {
						t.Errorf("%s: port %s is on container %s: %v", manifest, p.Name, c.Name, err)
					} else if p.ContainerPort != want {
						t.Errorf("%s: port %s is %d, but whguard serves /metrics on %d", manifest, p.Name, p.ContainerPort, want)
					}
				}
			}
			if !found {
				t.Errorf("%s: no container of %s has a port named %q", manifest, d.Name, *ep.Port)
			}
		}
	}
}
