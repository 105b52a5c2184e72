// Package sidecar holds the tests of the shipped deployment files: the
// image recipe, the Kubernetes manifests and the Compose file.
package sidecar

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"
)

var manifests = []string{"kubernetes.yaml", "kubernetes-embedded.yaml"}

// objects is a manifest file decoded strictly into k8s.io/api types.
type objects struct {
	secrets     []corev1.Secret
	claims      []corev1.PersistentVolumeClaim
	deployments []appsv1.Deployment
	services    []corev1.Service
	ingresses   []networkingv1.Ingress
}

var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// decodeManifest decodes each document of a multi-document file into the
// type of its kind; an unknown field, kind or apiVersion is an error (a
// misspelt key would otherwise be dropped silently by the cluster's
// client-side tools in some modes, and always by kube play).
func decodeManifest(data []byte) (*objects, error) {
	var o objects
	for i, doc := range docSeparator.Split(string(data), -1) {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if head.Kind == "" {
			if strings.TrimSpace(stripComments(doc)) != "" {
				return nil, fmt.Errorf("document %d has no kind", i+1)
			}
			continue
		}
		var target any
		switch head.APIVersion + " " + head.Kind {
		case "v1 Secret":
			o.secrets = append(o.secrets, corev1.Secret{})
			target = &o.secrets[len(o.secrets)-1]
		case "v1 PersistentVolumeClaim":
			o.claims = append(o.claims, corev1.PersistentVolumeClaim{})
			target = &o.claims[len(o.claims)-1]
		case "apps/v1 Deployment":
			o.deployments = append(o.deployments, appsv1.Deployment{})
			target = &o.deployments[len(o.deployments)-1]
		case "v1 Service":
			o.services = append(o.services, corev1.Service{})
			target = &o.services[len(o.services)-1]
		case "networking.k8s.io/v1 Ingress":
			o.ingresses = append(o.ingresses, networkingv1.Ingress{})
			target = &o.ingresses[len(o.ingresses)-1]
		default:
			return nil, fmt.Errorf("document %d: unexpected %s %s", i+1, head.APIVersion, head.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), target); err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", i+1, head.Kind, err)
		}
	}
	return &o, nil
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// unresolvedSecretRefs lists every Secret key the Deployments read (env,
// envFrom, secret volumes) that no Secret in the file defines.
func unresolvedSecretRefs(o *objects) []string {
	keys := map[string]map[string]bool{}
	for _, s := range o.secrets {
		k := map[string]bool{}
		for name := range s.Data {
			k[name] = true
		}
		for name := range s.StringData {
			k[name] = true
		}
		keys[s.Name] = k
	}
	var missing []string
	for _, d := range o.deployments {
		spec := d.Spec.Template.Spec
		for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
			for _, e := range c.Env {
				if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
					continue
				}
				ref := e.ValueFrom.SecretKeyRef
				if ref.Optional != nil && *ref.Optional {
					continue
				}
				if _, ok := keys[ref.Name]; !ok {
					missing = append(missing, fmt.Sprintf("%s/%s: %s reads Secret %s, which is not defined", d.Name, c.Name, e.Name, ref.Name))
				} else if !keys[ref.Name][ref.Key] {
					missing = append(missing, fmt.Sprintf("%s/%s: %s reads key %s of Secret %s, which has no such key", d.Name, c.Name, e.Name, ref.Key, ref.Name))
				}
			}
			for _, ef := range c.EnvFrom {
				if ef.SecretRef != nil && keys[ef.SecretRef.Name] == nil {
					missing = append(missing, fmt.Sprintf("%s/%s: envFrom Secret %s is not defined", d.Name, c.Name, ef.SecretRef.Name))
				}
			}
		}
		for _, v := range spec.Volumes {
			if v.Secret == nil {
				continue
			}
			if keys[v.Secret.SecretName] == nil {
				missing = append(missing, fmt.Sprintf("%s: volume %s mounts Secret %s, which is not defined", d.Name, v.Name, v.Secret.SecretName))
				continue
			}
			for _, item := range v.Secret.Items {
				if !keys[v.Secret.SecretName][item.Key] {
					missing = append(missing, fmt.Sprintf("%s: volume %s mounts key %s of Secret %s, which has no such key", d.Name, v.Name, item.Key, v.Secret.SecretName))
				}
			}
		}
	}
	sort.Strings(missing)
	return missing
}

func readManifest(t *testing.T, name string) *objects {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	o, err := decodeManifest(data)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return o
}

func TestManifestsDecodeStrictly(t *testing.T) {
	for _, name := range manifests {
		o := readManifest(t, name)
		if len(o.deployments) != 1 {
			t.Errorf("%s: %d Deployments, want 1", name, len(o.deployments))
		}
	}
	// The strict decoding is what catches a misplaced key.
	bad := []byte("apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  selector: {app: x}\n  port: 80\n")
	if _, err := decodeManifest(bad); err == nil || !strings.Contains(err.Error(), "port") {
		t.Errorf("an unknown field decoded: %v", err)
	}
}

// Every Secret key the manifests read is defined next to them: the
// embedded manifest used to read key shop-secret of a Secret defined
// nowhere, and its pod could not start.
func TestManifestSecretRefsResolve(t *testing.T) {
	for _, name := range manifests {
		if missing := unresolvedSecretRefs(readManifest(t, name)); len(missing) > 0 {
			t.Errorf("%s:\n  %s", name, strings.Join(missing, "\n  "))
		}
	}
	// The check itself: the embedded manifest as it was (no Secret).
	data, err := os.ReadFile("kubernetes-embedded.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := docSeparator.Split(string(data), -1)
	o, err := decodeManifest([]byte(strings.Join(docs[1:], "\n---\n")))
	if err != nil {
		t.Fatal(err)
	}
	missing := unresolvedSecretRefs(o)
	if len(missing) != 2 || !strings.Contains(missing[1], "WHGUARD_SHOP_SECRET reads Secret orders-webhooks") {
		t.Errorf("without its Secret, the embedded manifest reported %q", missing)
	}
	o.secrets = []corev1.Secret{{StringData: map[string]string{"admin-token": "x"}}}
	o.secrets[0].Name = "orders-webhooks"
	if missing := unresolvedSecretRefs(o); len(missing) != 1 || !strings.Contains(missing[0], "key shop-secret") {
		t.Errorf("with a Secret lacking shop-secret: %q", missing)
	}
}

// The whguard container of each manifest: hardened, bounded, probed on
// the metrics listener, admin API on loopback, journal where it can write.
func TestManifestWhguardContainer(t *testing.T) {
	for _, name := range manifests {
		o := readManifest(t, name)
		for _, d := range o.deployments {
			spec := d.Spec.Template.Spec
			i := slices.IndexFunc(spec.Containers, func(c corev1.Container) bool { return c.Name == "whguard" })
			if i < 0 {
				t.Fatalf("%s: no whguard container", name)
			}
			c := spec.Containers[i]
			env := map[string]string{}
			for _, e := range c.Env {
				env[e.Name] = e.Value
			}
			sc := c.SecurityContext
			switch {
			case sc == nil:
				t.Errorf("%s: no securityContext", name)
			case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot,
				sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem,
				sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation,
				sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}):
				t.Errorf("%s: securityContext %+v: want runAsNonRoot, readOnlyRootFilesystem, no privilege escalation, capabilities dropped", name, *sc)
			case sc.RunAsUser == nil || *sc.RunAsUser != 65532:
				t.Errorf("%s: runAsUser is not the image's 65532", name)
			}
			if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("%s: no memory request or limit", name)
			}
			if host, _, _ := net.SplitHostPort(env["WHGUARD_ADMIN_LISTEN"]); host != "127.0.0.1" {
				t.Errorf("%s: WHGUARD_ADMIN_LISTEN=%q: the admin API must stay on loopback", name, env["WHGUARD_ADMIN_LISTEN"])
			}
			_, metricsPort, _ := net.SplitHostPort(env["WHGUARD_METRICS_LISTEN"])
			ports := map[string]string{}
			for _, p := range c.Ports {
				ports[p.Name] = fmt.Sprint(p.ContainerPort)
			}
			if ports["metrics"] != metricsPort || metricsPort == "" {
				t.Errorf("%s: port metrics is %q, WHGUARD_METRICS_LISTEN is %q", name, ports["metrics"], env["WHGUARD_METRICS_LISTEN"])
			}
			for probe, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
				if p == nil || p.HTTPGet == nil || p.HTTPGet.Port.String() != "metrics" {
					t.Errorf("%s: %s probe is not an HTTP probe of the metrics port", name, probe)
				}
			}
			if c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil && c.ReadinessProbe.HTTPGet.Path != "/readyz" {
				t.Errorf("%s: readiness probe on %s", name, c.ReadinessProbe.HTTPGet.Path)
			}
			// A read-only root: an embedded journal must live on a volume.
			if path, ok := strings.CutPrefix(env["WHGUARD_DATABASE_URL"], "sqlite:"); ok {
				mounted := false
				for _, m := range c.VolumeMounts {
					if strings.HasPrefix(path, m.MountPath+"/") && !m.ReadOnly {
						mounted = true
					}
				}
				if !mounted {
					t.Errorf("%s: the journal %s is not on a writable volume", name, path)
				}
				if *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
					t.Errorf("%s: the embedded journal needs one replica and the Recreate strategy", name)
				}
			}
		}
		// Every Service port targets a named container port.
		for _, s := range o.services {
			for _, p := range s.Spec.Ports {
				found := false
				for _, d := range o.deployments {
					for _, c := range d.Spec.Template.Spec.Containers {
						for _, cp := range c.Ports {
							found = found || cp.Name == p.TargetPort.String()
						}
					}
				}
				if !found {
					t.Errorf("%s: Service %s targets port %s, which no container names", name, s.Name, p.TargetPort.String())
				}
			}
		}
	}
}

// playableManifest is kubernetes-embedded.yaml as the container test plays
// it: the test's images, host ports on loopback, and names ending in
// suffix so that nothing it creates meets another run's.
func playableManifest(t *testing.T, suffix, webhookHostPort, metricsHostPort, appHostPort string) []byte {
	t.Helper()
	out, err := os.ReadFile("kubernetes-embedded.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ old, new string }{
		{"image: example/orders:latest", "image: " + ordersImage},
		{"image: whguard:latest", "image: " + image},
		{"{name: webhooks, containerPort: 8080}", "{name: webhooks, containerPort: 8080, hostIP: 127.0.0.1, hostPort: " + webhookHostPort + "}"},
		{"{name: metrics, containerPort: 9091}", "{name: metrics, containerPort: 9091, hostIP: 127.0.0.1, hostPort: " + metricsHostPort + "}"},
		{"[{containerPort: 3000}]", "[{containerPort: 3000, hostIP: 127.0.0.1, hostPort: " + appHostPort + "}]"},
		{"orders-webhooks", "orders-webhooks-" + suffix},
		{"whguard-journal", "whguard-journal-" + suffix},
		{"\n  name: orders\n", "\n  name: orders-" + suffix + "\n"},
	} {
		if !bytes.Contains(out, []byte(r.old)) {
			t.Fatalf("kubernetes-embedded.yaml no longer contains %q", r.old)
		}
		out = bytes.ReplaceAll(out, []byte(r.old), []byte(r.new))
	}
	return out
}

// What the container test plays still decodes and resolves its Secrets.
func TestPlayableManifest(t *testing.T) {
	o, err := decodeManifest(playableManifest(t, "x", "18080", "19091", "13000"))
	if err != nil {
		t.Fatal(err)
	}
	if missing := unresolvedSecretRefs(o); len(missing) > 0 || len(o.claims) != 1 || o.claims[0].Name != "whguard-journal-x" {
		t.Errorf("unresolved %q, claims %d", missing, len(o.claims))
	}
}

// The manifests' secret values are placeholders whguard refuses to start
// with (a value ending with "…"): an unedited manifest cannot run with a
// secret or admin token anyone can read here. The database URL is the
// exception: it names the PostgreSQL the manifest expects.
func TestManifestSecretsArePlaceholders(t *testing.T) {
	for _, name := range manifests {
		o := readManifest(t, name)
		for _, s := range o.secrets {
			for key, v := range s.StringData {
				if key != "database-url" && !strings.HasSuffix(v, "…") {
					t.Errorf("%s: Secret %s key %s is not a placeholder whguard refuses (ending with …)", name, s.Name, key)
				}
			}
		}
	}
}

// Each *_SECRET_FILE of a manifest is a key of a Secret volume mounted as
// a directory: the kubelet updates such files when the Secret changes, so
// a rotated secret reaches whguard without a restart (a subPath mount is
// never updated).
func TestManifestSecretFilesFollowTheSecret(t *testing.T) {
	files := 0
	for _, name := range manifests {
		o := readManifest(t, name)
		for _, d := range o.deployments {
			spec := d.Spec.Template.Spec
			volumes := map[string]*corev1.SecretVolumeSource{}
			for _, v := range spec.Volumes {
				volumes[v.Name] = v.Secret
			}
			for _, c := range spec.Containers {
				for _, e := range c.Env {
					if !strings.HasSuffix(e.Name, "_SECRET_FILE") {
						continue
					}
					files++
					dir, file := filepath.Split(e.Value)
					i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
						return filepath.Clean(m.MountPath) == filepath.Clean(dir)
					})
					if i < 0 {
						t.Errorf("%s: %s=%s is on no volume mount", name, e.Name, e.Value)
						continue
					}
					m := c.VolumeMounts[i]
					src := volumes[m.Name]
					switch {
					case m.SubPath != "":
						t.Errorf("%s: %s is mounted with subPath: the kubelet never updates it", name, e.Name)
					case src == nil:
						t.Errorf("%s: %s is not on a Secret volume", name, e.Name)
					case len(src.Items) > 0 && !slices.ContainsFunc(src.Items, func(k corev1.KeyToPath) bool { return k.Path == file }):
						t.Errorf("%s: volume %s has no item at %s", name, m.Name, file)
					}
				}
			}
		}
	}
	if files == 0 {
		t.Error("no manifest reads a signing secret from a file: rotating one would need a restart")
	}
}
