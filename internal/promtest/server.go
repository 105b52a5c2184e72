package promtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/whguard/whguard/internal/testport"
)

// Server is a real Prometheus run by a test, scraping its targets and
// evaluating its rule files every Interval.
type Server struct {
	// URL is its HTTP API's base, http://127.0.0.1:PORT.
	URL string
	t   testing.TB
}

// Config is what a Server scrapes and evaluates.
type Config struct {
	// Targets are host:port addresses scraped at /metrics, as job whguard.
	Targets []string
	// RuleFiles are loaded as they are.
	RuleFiles []string
	// Interval is both the scrape and the evaluation interval (1 s when
	// zero).
	Interval time.Duration
}

// lockedBuffer keeps a process's output for failure messages.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Start runs a Prometheus server (Tool "prometheus") on a free loopback
// port with its storage in a temporary directory, waits until it is
// ready, and stops it when the test ends.
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	bin := Tool(t, "prometheus")
	if cfg.Interval == 0 {
		cfg.Interval = time.Second
	}
	dir := t.TempDir()
	var rules []string
	for _, f := range cfg.RuleFiles {
		abs, err := filepath.Abs(f)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, abs)
	}
	conf, _ := json.Marshal(map[string]any{ // JSON is YAML
		"global":     map[string]string{"scrape_interval": cfg.Interval.String(), "evaluation_interval": cfg.Interval.String()},
		"rule_files": rules,
		"scrape_configs": []any{map[string]any{
			"job_name": "whguard", "static_configs": []any{map[string]any{"targets": cfg.Targets}},
		}},
	})
	confPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(confPath, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	cmd := exec.Command(bin, "--config.file="+confPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("prometheus output:\n%s", out.String())
		}
	})
	s := &Server{URL: "http://" + addr, t: t}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.URL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		select {
		case <-done:
			t.Fatalf("prometheus exited:\n%s", out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready within 30 s:\n%s", out.String())
		}
	}
}

// freeAddr is a loopback address for the Prometheus process to bind (see
// testport: outside the range outgoing connections take their ports from).
func freeAddr(t testing.TB) string {
	t.Helper()
	return testport.Free(t)
}

// Alert is one alert as /api/v1/alerts lists it.
type Alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"` // pending or firing
	Value       string            `json:"value"`
}

// Alerts lists the pending and firing alerts.
func (s *Server) Alerts() ([]Alert, error) {
	var v struct {
		Alerts []Alert `json:"alerts"`
	}
	if err := s.get("/api/v1/alerts", &v); err != nil {
		return nil, err
	}
	return v.Alerts, nil
}

// Series is one element of an instant query's vector.
type Series struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// Query runs an instant query; an expression Prometheus refuses is an
// error naming why.
func (s *Server) Query(expr string) ([]Series, error) {
	var v struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := s.get("/api/v1/query?query="+url.QueryEscape(expr), &v); err != nil {
		return nil, err
	}
	if v.ResultType != "vector" {
		return nil, fmt.Errorf("%s: a %s, not an instant vector", expr, v.ResultType)
	}
	var out []Series
	if err := json.Unmarshal(v.Result, &out); err != nil {
		return nil, fmt.Errorf("%s: %w", expr, err)
	}
	return out, nil
}

// Targets reports each scrape target's health (up, down, unknown) by
// its address.
func (s *Server) Targets() (map[string]string, error) {
	var v struct {
		ActiveTargets []struct {
			ScrapeURL string `json:"scrapeUrl"`
			Health    string `json:"health"`
		} `json:"activeTargets"`
	}
	if err := s.get("/api/v1/targets", &v); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, tg := range v.ActiveTargets {
		u, err := url.Parse(tg.ScrapeURL)
		if err != nil {
			return nil, err
		}
		out[u.Host] = tg.Health
	}
	return out, nil
}

// get reads an API answer's data into out.
func (s *Server) get(path string, out any) error {
	resp, err := http.Get(s.URL + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var v struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	if v.Status != "success" {
		return fmt.Errorf("GET %s: %s", strings.SplitN(path, "?", 2)[0], v.Error)
	}
	return json.Unmarshal(v.Data, out)
}
