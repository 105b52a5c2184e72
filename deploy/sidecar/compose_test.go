package sidecar

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// loadCompose loads compose.yaml as Compose would, with environ as the
// only environment.
func loadCompose(t *testing.T, environ ...string) (*types.Project, error) {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{"compose.yaml"},
		cli.WithName("whguard-sidecar"), cli.WithEnv(environ), cli.WithWorkingDirectory("."))
	if err != nil {
		t.Fatal(err)
	}
	return cli.ProjectFromOptions(context.Background(), opts)
}

func TestComposeFile(t *testing.T) {
	p, err := loadCompose(t, "POSTGRES_PASSWORD=pw", "WHGUARD_ADMIN_TOKEN=tok")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"app", "whguard", "postgres"} {
		if _, err := p.GetService(name); err != nil {
			t.Fatal(err)
		}
	}
	app, _ := p.GetService("app")
	wg, _ := p.GetService("whguard")
	env := func(s types.ServiceConfig, k string) string {
		if v := s.Environment[k]; v != nil {
			return *v
		}
		return ""
	}

	// Nothing is pulled that nothing uses: every service is whguard, the
	// app, or what whguard names.
	if len(p.Services) != 3 {
		t.Errorf("%d services, want app, whguard and postgres", len(p.Services))
	}
	// whguard forwards to the app by its service name (a shared network
	// namespace, network_mode: service:app, broke "docker-compose down"
	// through Podman: the app could not be removed before whguard); each
	// publishes its own port.
	if wg.NetworkMode != "" {
		t.Errorf("whguard network_mode %q: want the Compose network", wg.NetworkMode)
	}
	_, appPort, _ := net.SplitHostPort(env(app, "ORDERS_LISTEN"))
	if got, want := env(wg, "WHGUARD_BACKEND_URL"), "http://app:"+appPort; got != want {
		t.Errorf("WHGUARD_BACKEND_URL %q, want %q", got, want)
	}
	_, ingressPort, _ := net.SplitHostPort(env(wg, "WHGUARD_LISTEN"))
	published := func(s types.ServiceConfig, port string) bool {
		for _, p := range s.Ports {
			if fmt.Sprint(p.Target) == port {
				return true
			}
		}
		return false
	}
	if !published(app, appPort) || !published(wg, ingressPort) {
		t.Errorf("app port %s and whguard's ingress %s must each be published by its service", appPort, ingressPort)
	}
	if host, _, _ := net.SplitHostPort(env(wg, "WHGUARD_ADMIN_LISTEN")); host != "127.0.0.1" {
		t.Errorf("WHGUARD_ADMIN_LISTEN %q: the admin API must stay on loopback", env(wg, "WHGUARD_ADMIN_LISTEN"))
	}

	// The journal in the PostgreSQL service, with the password from the
	// environment on both sides.
	u, err := url.Parse(env(wg, "WHGUARD_DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	pgPassword := env(mustService(t, p, "postgres"), "POSTGRES_PASSWORD")
	if pw, _ := u.User.Password(); u.Hostname() != "postgres" || pw != "pw" || pgPassword != "pw" {
		t.Errorf("WHGUARD_DATABASE_URL %s and POSTGRES_PASSWORD %q do not meet", u.Redacted(), pgPassword)
	}
	if env(wg, "WHGUARD_ADMIN_TOKEN") != "tok" {
		t.Errorf("WHGUARD_ADMIN_TOKEN is not taken from the environment")
	}

	// Every secret whguard mounts is defined, from a file, and the
	// variable reading it names the mount.
	for _, s := range wg.Secrets {
		def, ok := p.Secrets[s.Source]
		if !ok {
			t.Errorf("whguard mounts secret %s, which is not defined", s.Source)
			continue
		}
		if def.File == "" {
			t.Errorf("secret %s has no file", s.Source)
		}
		mounted := "/run/secrets/" + s.Source
		found := false
		for k, v := range wg.Environment {
			found = found || (strings.HasSuffix(k, "_SECRET_FILE") && v != nil && *v == mounted)
		}
		if !found {
			t.Errorf("no WHGUARD_*_SECRET_FILE reads %s", mounted)
		}
	}
	if len(wg.Secrets) == 0 {
		t.Error("whguard mounts no secret")
	}
	if def := p.Secrets["shop-secret"]; filepath.Base(def.File) != "shop-secret" {
		t.Errorf("shop-secret file %q", def.File)
	}

	if !wg.ReadOnly || !slices.Equal(wg.CapDrop, []string{"ALL"}) {
		t.Errorf("whguard read_only %v cap_drop %v: want a read-only root and no capabilities", wg.ReadOnly, wg.CapDrop)
	}
	if wg.Build == nil || wg.Build.Dockerfile != "deploy/sidecar/Dockerfile" {
		t.Errorf("whguard is not built from deploy/sidecar/Dockerfile: %+v", wg.Build)
	}
}

// Without the PostgreSQL password Compose refuses to start, rather than
// running PostgreSQL and whguard with an empty one.
func TestComposeNeedsPassword(t *testing.T) {
	if _, err := loadCompose(t); err == nil || !strings.Contains(err.Error(), "POSTGRES_PASSWORD") {
		t.Errorf("loaded without POSTGRES_PASSWORD: %v", err)
	}
}

func mustService(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, err := p.GetService(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
