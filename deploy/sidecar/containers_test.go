package sidecar

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/internal/testport"
	"github.com/whguard/whguard/internal/testwait"
)

// The container test builds the shipped image recipe with Podman and runs
// what deploy/sidecar ships: the image alone (no volume; read-only root
// and a fresh named volume; SIGKILL and restart), the embedded Kubernetes
// manifest with `podman kube play`, and compose.yaml with docker-compose
// against Podman's API. `make sidecar-test` (and `make test`) run it with
// Podman installed and configured by .ci/with-podman.sh.

const (
	image       = "localhost/whguard:dev"
	ordersImage = "localhost/whguard-orders:dev"
	// shopSecret is the test's signing secret (scheme "standard").
	shopSecret = "whsec_c2lkZWNhci10ZXN0LXNpZ25pbmctc2VjcmV0"
	adminToken = "sidecar-test-admin-token"
)

func TestContainers(t *testing.T) {
	if os.Getenv("WHGUARD_TEST_CONTAINERS") == "" {
		t.Skip("builds and runs the images with Podman: run `make sidecar-test` (or set WHGUARD_TEST_CONTAINERS=1 with Podman set up by .ci/with-podman.sh)")
	}
	pm := &podman{suffix: fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano()%1_000_000)}

	start := time.Now()
	build := exec.Command("../../.ci/build-images.sh")
	build.Env = append(os.Environ(), "IMAGE="+image, "ORDERS_IMAGE="+ordersImage)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the images: %v\n%s", err, out)
	}
	t.Logf("images built in %s", time.Since(start).Round(time.Second))

	if !t.Run("image", func(t *testing.T) { testImage(t, pm) }) {
		return
	}
	t.Run("run", func(t *testing.T) { testRun(t, pm) })
	t.Run("kube-play", func(t *testing.T) { testKubePlay(t, pm) })
	t.Run("compose", func(t *testing.T) { testCompose(t, pm) })
}

// testImage reads the saved image: the data directory belongs to 65532
// in the layers themselves (no shell needed, whatever runs it), and the
// configuration is what the README says.
//
// The layers are where a missing or root-owned data directory shows:
// Podman hides it when running, since it creates a missing working
// directory and chowns a fresh named volume for the container's user
// (tried with the recipe without its COPY --chown: it ran, with and
// without a volume). Docker does neither: a fresh volume takes the owner
// of the image's directory, root when the directory is absent.
func testImage(t *testing.T, pm *podman) {
	archive := filepath.Join(t.TempDir(), "image.tar")
	pm.must(t, "image", "save", "--format", "docker-archive", "-o", archive, image)
	files := readImageFiles(t, archive)
	dir, ok := files["var/lib/whguard"]
	switch {
	case !ok:
		t.Errorf("no /var/lib/whguard in the image")
	case dir.Typeflag != tar.TypeDir || dir.Uid != 65532 || dir.Gid != 65532 || dir.Mode&0o700 != 0o700:
		t.Errorf("/var/lib/whguard: type %c, owner %d:%d, mode %o; want a directory 65532:65532 can write", dir.Typeflag, dir.Uid, dir.Gid, dir.Mode)
	}
	for _, f := range []string{"usr/local/bin/whguard", "etc/ssl/certs/ca-certificates.crt", "etc/passwd"} {
		if h, ok := files[f]; !ok || h.Typeflag != tar.TypeReg || h.Size == 0 {
			t.Errorf("no /%s in the image", f)
		}
	}

	var inspect []struct {
		Config struct {
			User       string
			WorkingDir string
			Entrypoint []string
			Cmd        []string
			Labels     map[string]string
		}
		HealthCheck *struct{ Test []string }
	}
	if err := json.Unmarshal([]byte(pm.must(t, "image", "inspect", image)), &inspect); err != nil || len(inspect) != 1 {
		t.Fatalf("image inspect: %v", err)
	}
	cfg := inspect[0].Config
	if cfg.User != "65532:65532" || cfg.WorkingDir != "/var/lib/whguard" ||
		strings.Join(cfg.Entrypoint, " ")+" "+strings.Join(cfg.Cmd, " ") != "/usr/local/bin/whguard serve" {
		t.Errorf("user %q, working directory %q, command %q %q", cfg.User, cfg.WorkingDir, cfg.Entrypoint, cfg.Cmd)
	}
	if hc := inspect[0].HealthCheck; hc == nil || !strings.Contains(strings.Join(hc.Test, " "), "whguard healthcheck") {
		t.Errorf("health check %+v, want whguard healthcheck", hc)
	}
	// The version label and the binary agree (and a binary that runs on
	// an empty base is static).
	version := cfg.Labels["org.opencontainers.image.version"]
	out := pm.must(t, "run", "--rm", image, "version")
	if version == "" || out != "whguard "+version {
		t.Errorf("label version %q, binary says %q", version, out)
	}
	for _, l := range []string{"org.opencontainers.image.source", "org.opencontainers.image.revision", "org.opencontainers.image.title"} {
		if cfg.Labels[l] == "" {
			t.Errorf("no label %s", l)
		}
	}
}

// readImageFiles returns the final header of every path in a
// docker-archive's layers, applied in order (whiteouts not needed here).
func readImageFiles(t *testing.T, archive string) map[string]*tar.Header {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	blobs := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if b, err := io.ReadAll(tr); err != nil {
			t.Fatal(err)
		} else {
			blobs[h.Name] = b
		}
	}
	var manifest []struct{ Layers []string }
	if err := json.Unmarshal(blobs["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest.json: %v", err)
	}
	files := map[string]*tar.Header{}
	for _, layer := range manifest[0].Layers {
		lr := tar.NewReader(bytes.NewReader(blobs[layer]))
		for {
			h, err := lr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("layer %s: %v", layer, err)
			}
			files[strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")] = h
		}
	}
	return files
}

// testRun runs the image in a pod with the example app, as 65532 with no
// volume, then with a read-only root and a fresh named volume, killed and
// restarted on that volume.
func testRun(t *testing.T, pm *podman) {
	webhooks, metrics, app := freePort(t), freePort(t), freePort(t)
	pod := "whguard-test-run-" + pm.suffix
	vol := "whguard-test-journal-" + pm.suffix
	pm.cleanup(t, "volume", "rm", "-f", vol)
	pm.cleanup(t, "pod", "rm", "-f", "-t", "2", pod)
	pm.must(t, "pod", "create", "--name", pod,
		"-p", "127.0.0.1:"+webhooks+":8080", "-p", "127.0.0.1:"+metrics+":9091", "-p", "127.0.0.1:"+app+":3000")
	pm.must(t, "run", "-d", "--pod", pod, "--name", pod+"-app", ordersImage)
	appURL := "http://127.0.0.1:" + app
	ingress := "http://127.0.0.1:" + webhooks + "/webhooks/shop"
	readyz := "http://127.0.0.1:" + metrics + "/readyz"
	sidecarEnv := []string{
		"-e", "WHGUARD_PROVIDERS=shop",
		"-e", "WHGUARD_SHOP_SCHEME=standard",
		"-e", "WHGUARD_SHOP_SECRET=" + shopSecret,
		"-e", "WHGUARD_BACKEND_URL=http://127.0.0.1:3000",
		"-e", "WHGUARD_ADMIN_TOKEN=" + adminToken,
		"-e", "WHGUARD_RETRY_BASE_DELAY=1s",
	}

	// No volume: the default sqlite:whguard.db lands in the image's data
	// directory, which 65532 must be able to write. A memory limit as the
	// manifests set: whguard sets Go's memory limit from it.
	first := pod + "-whguard-1"
	pm.must(t, append(append([]string{"run", "-d", "--pod", pod, "--name", first, "--user", "65532:65532", "--memory", "256m"}, sidecarEnv...), image)...)
	waitReady(t, pm, first, readyz)
	sendAndSee(t, ingress, appURL, "run1", 3)
	logs := pm.logs(t, first)
	limit := float64(256 << 20)
	if want := fmt.Sprintf(`"gomemlimit_bytes":%d`, int64(limit*0.9)); !strings.Contains(logs, "memory limit from the container's cgroup") || !strings.Contains(logs, want) {
		t.Errorf("whguard did not follow the container's 256 MiB limit (want %s):\n%s", want, logs)
	}
	pm.must(t, "rm", "-f", "-t", "2", first)

	// A read-only root (no tmpfs either, as readOnlyRootFilesystem) and a
	// fresh named volume on the data directory.
	pm.must(t, "volume", "create", vol)
	second := pod + "-whguard-2"
	pm.must(t, append(append([]string{"run", "-d", "--pod", pod, "--name", second,
		"--read-only", "--read-only-tmpfs=false", "-v", vol + ":/var/lib/whguard"}, sidecarEnv...), image)...)
	waitReady(t, pm, second, readyz)
	sendAndSee(t, ingress, appURL, "run2", 3)

	// Accepted while the backend is down, then SIGKILL: the events are in
	// the journal on the volume and go out once both are back.
	pm.must(t, "stop", "-t", "2", pod+"-app")
	ids := send(t, ingress, "killed", 3)
	pm.must(t, "kill", "-s", "KILL", second)
	pm.must(t, "wait", second)
	pm.must(t, "start", pod+"-app")
	pm.must(t, "start", second)
	waitReady(t, pm, second, readyz)
	seeDelivered(t, appURL, ids)

	var listed struct {
		Events []struct {
			EventID string `json:"event_id"`
			Status  string `json:"status"`
		} `json:"events"`
	}
	out := pm.must(t, "exec", second, "whguard", "events", "list", "-json", "-limit", "100")
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatalf("events list: %v\n%s", err, out)
	}
	done := 0
	for _, e := range listed.Events {
		if e.Status == "done" {
			done++
		}
	}
	if len(listed.Events) != 6 || done != 6 {
		t.Errorf("journal after the restart: %+v; want the 6 events of this volume, all done", listed.Events)
	}

	mountpoint := pm.must(t, "volume", "inspect", "--format", "{{.Mountpoint}}", vol)
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(mountpoint, "whguard.db"), &st); err != nil {
		t.Error(err)
	} else if st.Uid != 65532 {
		t.Errorf("the journal on the volume belongs to uid %d, want 65532", st.Uid)
	}

	// The image's HEALTHCHECK (whguard healthcheck) turns the container
	// healthy. Podman runs it from systemd timers, absent here: run it.
	waitFor(t, 30*time.Second, "healthy", func() (bool, string) {
		_, err := pm.run("healthcheck", "run", second)
		status, _ := pm.run("inspect", "--format", "{{.State.Health.Status}}", second)
		return err == nil && status == "healthy", fmt.Sprintf("healthcheck run: %v, status %q", err, status)
	})
}

// testKubePlay runs kubernetes-embedded.yaml as a pod and sends one event
// through it.
func testKubePlay(t *testing.T, pm *podman) {
	webhooks, metrics, app := freePort(t), freePort(t), freePort(t)
	manifest := playableManifest(t, pm.suffix, webhooks, metrics, app)
	o, err := decodeManifest(manifest)
	if err != nil {
		t.Fatal(err)
	}
	// Podman 4.3 turns a Secret document into a Podman secret it cannot
	// read back ("not valid JSON"): create it as the JSON map kube play
	// reads, with the test's values, and play the rest.
	if len(o.secrets) != 1 {
		t.Fatalf("%d Secrets in the embedded manifest", len(o.secrets))
	}
	secret := o.secrets[0]
	values := map[string][]byte{}
	for k := range secret.StringData {
		values[k] = []byte("unused")
	}
	values["shop-secret"], values["admin-token"] = []byte(shopSecret), []byte(adminToken)
	secretJSON, _ := json.Marshal(values)
	pm.cleanup(t, "secret", "rm", secret.Name)
	pm.mustInput(t, secretJSON, "secret", "create", secret.Name, "-")
	docs := docSeparator.Split(string(manifest), -1)
	play := filepath.Join(t.TempDir(), "kube.yaml")
	if err := os.WriteFile(play, []byte(strings.Join(docs[1:], "\n---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range o.claims {
		pm.cleanup(t, "volume", "rm", "-f", c.Name)
	}
	pm.cleanup(t, "kube", "down", play)
	pm.must(t, "kube", "play", play)

	podName := pm.must(t, "pod", "ps", "--filter", "name="+o.deployments[0].Name+"-pod", "--format", "{{.Name}}")
	sidecar := podName + "-whguard"
	waitReady(t, pm, sidecar, "http://127.0.0.1:"+metrics+"/readyz")
	sendAndSee(t, "http://127.0.0.1:"+webhooks+"/webhooks/shop", "http://127.0.0.1:"+app, "kube", 1)

	// Kube play ignores fsGroup; the journal on the fresh volume is the
	// container user's.
	mountpoint := pm.must(t, "volume", "inspect", "--format", "{{.Mountpoint}}", o.claims[0].Name)
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(mountpoint, "whguard.db"), &st); err != nil {
		t.Error(err)
	} else if st.Uid != 65532 {
		t.Errorf("the journal belongs to uid %d, want 65532", st.Uid)
	}
	if out, err := pm.run("exec", sidecar, "whguard", "healthcheck"); err != nil {
		t.Errorf("whguard healthcheck in the pod: %v %s", err, out)
	}
}

// testCompose brings up compose.yaml's app and whguard with docker-compose
// against Podman's API, the journal in the test's PostgreSQL, and sends
// one event through it.
func testCompose(t *testing.T, pm *podman) {
	if _, err := exec.LookPath("docker-compose"); err != nil {
		t.Fatal("docker-compose is not installed (.ci/with-podman.sh installs it)")
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "podman.sock")
	svc := exec.Command("podman", "system", "service", "--time=0", "unix://"+sock)
	var svcLog bytes.Buffer
	svc.Stdout, svc.Stderr = &svcLog, &svcLog
	if err := svc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = svc.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = svc.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = svc.Process.Kill()
			<-done
		}
	})
	api := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	waitFor(t, 20*time.Second, "Podman's API", func() (bool, string) {
		resp, err := api.Get("http://podman/_ping")
		if err != nil {
			return false, err.Error() + "\n" + svcLog.String()
		}
		resp.Body.Close()
		return resp.StatusCode == 200, resp.Status
	})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	dbURL, drop, err := testdb.Create(ctx, "compose")
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)

	// PostgreSQL's image cannot be pulled here: only app and whguard are
	// started, and the override points whguard at the test's PostgreSQL,
	// through a relay on the Compose network's gateway (the server
	// listens on the host's loopback, out of the containers' reach).
	network := "whguard-test-" + pm.suffix
	pm.cleanup(t, "network", "rm", "-f", network)
	pm.must(t, "network", "create", network)
	gateway := pm.must(t, "network", "inspect", "--format", "{{range .Subnets}}{{.Gateway}}{{end}}", network)
	// The bridge, and so the gateway address, exists once a container
	// joins the network.
	holder := network + "-holder"
	pm.cleanup(t, "rm", "-f", "-t", "0", holder)
	pm.must(t, "run", "-d", "--name", holder, "--network", network, ordersImage)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = relay(t, net.JoinHostPort(gateway, "0"), u.Host)
	webhooks, app := freePort(t), freePort(t)
	override := fmt.Sprintf(`services:
  whguard:
    environment:
      WHGUARD_DATABASE_URL: %q
networks:
  default:
    name: %s
    external: true
`, u.String(), network)
	overrideFile := filepath.Join(dir, "override.yaml")
	secretFile := filepath.Join(dir, "shop-secret")
	if err := os.WriteFile(overrideFile, []byte(override), 0o644); err != nil {
		t.Fatal(err)
	}
	// A file written with a trailing newline, as editors do: whguard trims it.
	if err := os.WriteFile(secretFile, []byte(shopSecret+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	project := "whguard-test-" + pm.suffix
	compose := func(args ...string) (string, error) {
		cmd := exec.Command("docker-compose", append([]string{"-p", project, "-f", "compose.yaml", "-f", overrideFile}, args...)...)
		cmd.Env = append(os.Environ(), "DOCKER_HOST=unix://"+sock, "POSTGRES_PASSWORD=unused-by-the-test",
			"WHGUARD_ADMIN_TOKEN="+adminToken, "SHOP_SECRET_FILE="+secretFile, "COMPOSE_HTTP_TIMEOUT=120",
			"ORDERS_PORT=127.0.0.1:"+app, "WEBHOOKS_PORT=127.0.0.1:"+webhooks)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return string(out), fmt.Errorf("docker-compose %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return string(out), nil
	}
	downed := false
	t.Cleanup(func() {
		if downed {
			return
		}
		if _, err := compose("down", "-v", "--remove-orphans", "-t", "2"); err != nil {
			t.Logf("cleanup: %v", err)
		}
	})
	if _, err := compose("up", "-d", "--no-build", "--no-deps", "app", "whguard"); err != nil {
		t.Fatal(err)
	}
	ctr := strings.TrimSpace(must(t)(compose("ps", "-q", "whguard")))
	// The metrics listener stays inside the namespace: the image's health
	// check is the readiness test here.
	waitFor(t, 60*time.Second, "healthy", func() (bool, string) {
		_, err := pm.run("healthcheck", "run", ctr)
		if err != nil {
			logs, _ := pm.run("logs", "--tail", "20", ctr)
			return false, fmt.Sprintf("%v\nlogs:\n%s", err, logs)
		}
		return true, ""
	})
	sendAndSee(t, "http://127.0.0.1:"+webhooks+"/webhooks/shop", "http://127.0.0.1:"+app, "compose", 1)
	if out, err := pm.run("exec", ctr, "whguard", "events", "list"); err != nil || !strings.Contains(out, "done") {
		t.Errorf("whguard events list in the Compose container: %v\n%s", err, out)
	}
	// And down again, all of it (it used to fail on the shared namespace).
	out, err := compose("down", "--remove-orphans", "-t", "2")
	downed = true
	if err != nil || strings.Contains(out, "ERROR") {
		t.Fatalf("docker-compose down: %v\n%s", err, out)
	}
	if left := pm.must(t, "ps", "-a", "-q", "--filter", "label=com.docker.compose.project="+project); left != "" {
		t.Errorf("containers left after docker-compose down: %s", left)
	}
}

// relay forwards TCP connections accepted on listen to target until the
// test ends, and returns the address it listens on.
func relay(t *testing.T, listen, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = io.Copy(out, in); out.Close() }()
			go func() { defer wg.Done(); _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	return ln.Addr().String()
}

func must(t *testing.T) func(string, error) string {
	return func(s string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

// podman runs podman commands; names made by the test end in suffix.
type podman struct{ suffix string }

// Podman without systemd logs this for every container with a health
// check; the checks are run by hand here.
var systemdNoise = regexp.MustCompile(`(?m)^.*(systemd connection|/run/systemd).*\n?`)

func (p *podman) runInput(input []byte, args ...string) (string, error) {
	cmd := exec.Command("podman", args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if input != nil {
		cmd.Stdin = bytes.NewReader(input)
	}
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("podman %s: %w\n%s%s", strings.Join(args, " "), err, out.String(), systemdNoise.ReplaceAllString(errb.String(), ""))
	}
	return strings.TrimSpace(out.String()), nil
}

func (p *podman) run(args ...string) (string, error) { return p.runInput(nil, args...) }

// logs returns what a container wrote, stdout and stderr together
// (whguard logs on stderr, which `podman logs` passes on as stderr).
func (p *podman) logs(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("podman", "logs", name).CombinedOutput()
	if err != nil {
		t.Fatalf("podman logs %s: %v\n%s", name, err, out)
	}
	return string(out)
}

func (p *podman) must(t *testing.T, args ...string) string {
	t.Helper()
	out, err := p.run(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (p *podman) mustInput(t *testing.T, input []byte, args ...string) string {
	t.Helper()
	out, err := p.runInput(input, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// cleanup runs a podman command when the test ends (last registered,
// first run), logging a failure.
func (p *podman) cleanup(t *testing.T, args ...string) {
	t.Cleanup(func() {
		if _, err := p.run(args...); err != nil {
			t.Logf("cleanup: %v", err)
		}
	})
}

// freePort is a loopback port for a container to publish (see testport).
func freePort(t *testing.T) string {
	t.Helper()
	return strconv.Itoa(testport.Number(t))
}

func waitFor(t *testing.T, timeout time.Duration, what string, ok func() (bool, string)) {
	t.Helper()
	var detail string
	if !testwait.Until(timeout, 200*time.Millisecond, func() bool {
		var done bool
		done, detail = ok()
		return done
	}) {
		t.Fatalf("not %s after %s: %s", what, timeout, detail)
	}
}

// waitReady waits for readyz to answer 200, showing the container's logs
// if it never does.
func waitReady(t *testing.T, pm *podman, container, readyz string) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	var err error
	if !testwait.Until(60*time.Second, 200*time.Millisecond, func() bool {
		var resp *http.Response
		if resp, err = client.Get(readyz); err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}) {
		logs, _ := pm.run("logs", container)
		state, _ := pm.run("inspect", "--format", "{{.State.Status}} exit {{.State.ExitCode}}", container)
		t.Fatalf("%s not ready (%v; container %s); logs:\n%s", readyz, err, state, logs)
	}
}

// signStandard signs like a Standard Webhooks sender.
func signStandard(id string, ts int64, body []byte) string {
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(shopSecret, "whsec_"))
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%d.%s", id, ts, body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// post sends one signed event for order id and returns the status.
func post(t *testing.T, ingress, id string) int {
	t.Helper()
	body := []byte(fmt.Sprintf(`{"type":"order.paid","data":{"order_id":%q}}`, id))
	ts := time.Now().Unix()
	req, _ := http.NewRequest(http.MethodPost, ingress, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", "msg_"+id)
	req.Header.Set("webhook-timestamp", fmt.Sprint(ts))
	req.Header.Set("webhook-signature", signStandard("msg_"+id, ts, body))
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("send %s: %v", id, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// send posts n new events, each accepted (202), and returns their order ids.
func send(t *testing.T, ingress, prefix string, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if s := post(t, ingress, id); s != http.StatusAccepted {
			t.Fatalf("event %s: status %d, want 202", id, s)
		}
		ids = append(ids, id)
	}
	return ids
}

// sendAndSee sends n events, resends the first (a duplicate: 200, not
// delivered again), and waits until the app has applied each once.
func sendAndSee(t *testing.T, ingress, appURL, prefix string, n int) {
	t.Helper()
	ids := send(t, ingress, prefix, n)
	if s := post(t, ingress, ids[0]); s != http.StatusOK {
		t.Errorf("a resent event: status %d, want 200", s)
	}
	seeDelivered(t, appURL, ids)
}

// seeDelivered waits until the app shows each order changed exactly once.
func seeDelivered(t *testing.T, appURL string, ids []string) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	waitFor(t, 60*time.Second, "delivered", func() (bool, string) {
		for _, id := range ids {
			resp, err := client.Get(appURL + "/orders/" + id)
			if err != nil {
				return false, err.Error()
			}
			var o struct{ StateChanges int }
			err = json.NewDecoder(resp.Body).Decode(&o)
			resp.Body.Close()
			if resp.StatusCode != 200 || err != nil {
				return false, fmt.Sprintf("order %s: %s", id, resp.Status)
			}
			if o.StateChanges != 1 {
				t.Fatalf("order %s changed %d times, want once", id, o.StateChanges)
			}
		}
		return true, ""
	})
}
