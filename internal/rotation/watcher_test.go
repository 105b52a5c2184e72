package rotation

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/whguard/whguard/internal/rotation/rotationtest"
	"github.com/whguard/whguard/internal/testwait"
)

// lines is a Parse: the non-blank lines, refused when there are none or
// one says "bad".
func lines(b []byte) ([]string, error) {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("the file holds no secret")
	}
	if slices.Contains(out, "bad") {
		return nil, errors.New("a line is not in the scheme's format")
	}
	return out, nil
}

// fixture is a watcher over one provider's files with a clock the test
// moves, recording what it applied.
type fixture struct {
	t     *testing.T
	w     *Watcher
	reg   *prometheus.Registry
	logs  *observer.ObservedLogs
	now   time.Time
	mu    sync.Mutex
	apply [][][]string
	// refuse makes Apply fail while set.
	refuse bool
}

func newFixture(t *testing.T, overlap time.Duration, files ...File) *fixture {
	t.Helper()
	core, logs := observer.New(zap.DebugLevel)
	f := &fixture{t: t, reg: prometheus.NewRegistry(), logs: logs, now: time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)}
	w, err := New(Config{
		Providers: []Provider{{Name: "pay", Overlap: overlap, Files: files, Apply: func(acc [][]string) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.refuse {
				return errors.New("secret 1 of 1: not base64")
			}
			f.apply = append(f.apply, acc)
			return nil
		}}},
		Now:     func() time.Time { return f.now },
		Metrics: NewMetrics(f.reg),
		Logger:  zap.New(core),
	})
	if err != nil {
		t.Fatal(err)
	}
	f.w = w
	return f
}

// applied is what the provider was last given ("" when nothing yet).
func (f *fixture) applied() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.apply) == 0 {
		return ""
	}
	return fmt.Sprint(f.apply[len(f.apply)-1])
}

func (f *fixture) count(result string) float64 {
	return testutil.ToFloat64(f.w.cfg.Metrics.reloads.WithLabelValues("pay", result))
}

// noValueLogged fails when a log entry holds one of the values.
func (f *fixture) noValueLogged(values ...string) {
	f.t.Helper()
	for _, e := range f.logs.All() {
		text := e.Message + fmt.Sprint(e.ContextMap())
		for _, v := range values {
			if strings.Contains(text, v) {
				f.t.Errorf("a log entry holds a value: %s", text)
			}
		}
	}
}

// A Kubernetes Secret update is followed: the new secret is applied with
// the old one accepted for the overlap, measured on the injected clock,
// then without it; nothing logged holds a secret.
func TestWatcherFollowsKubernetesSwap(t *testing.T) {
	kd := rotationtest.NewKubeSecret(t, map[string]string{"stripe-secret": "whsec_old\n"})
	path := kd.Path("stripe-secret")
	f := newFixture(t, time.Hour, File{Variable: "WHGUARD_PAY_SECRET_FILE", Path: path, Parse: lines, Initial: []string{"whsec_old"}})
	f.w.Poll()
	if f.applied() != "" || f.count(ResultOK)+f.count(ResultUnchanged)+f.count(ResultError) != 0 {
		t.Fatalf("the first read of an unchanged file applied %s / counted", f.applied())
	}

	kd.Update(map[string]string{"stripe-secret": "whsec_new\n"})
	f.now = f.now.Add(time.Minute)
	f.w.Poll()
	if got := f.applied(); got != "[[whsec_new whsec_old]]" || f.count(ResultOK) != 1 {
		t.Fatalf("after the swap: applied %s, ok %v", got, f.count(ResultOK))
	}

	// The same content again (a resync): counted, nothing applied.
	kd.Update(map[string]string{"stripe-secret": "whsec_new\r\n"})
	f.w.Poll()
	if f.count(ResultUnchanged) != 1 || len(f.apply) != 1 {
		t.Fatalf("a resync: unchanged %v, %d applies", f.count(ResultUnchanged), len(f.apply))
	}

	f.now = f.now.Add(time.Hour - time.Second)
	f.w.Poll()
	if len(f.apply) != 1 {
		t.Fatalf("the old secret dropped before the overlap ended: %s", f.applied())
	}
	f.now = f.now.Add(time.Second)
	f.w.Poll()
	if got := f.applied(); got != "[[whsec_new]]" {
		t.Fatalf("after the overlap: applied %s", got)
	}
	f.noValueLogged("whsec_old", "whsec_new")
	if f.logs.FilterMessageSnippet("overlap ended").Len() != 1 || f.logs.FilterMessageSnippet("reloaded").Len() != 1 {
		t.Errorf("logs: %v", f.logs.All())
	}
}

// A Vault agent's update: a new file renamed over the old one.
func TestWatcherFollowsAtomicRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secret")
	write := func(content string) {
		tmp := filepath.Join(dir, ".secret.tmp")
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write("one\n")
	f := newFixture(t, 0, File{Variable: "WHGUARD_PAY_SECRET_FILE", Path: path, Parse: lines, Initial: []string{"one"}})
	write("two\n")
	f.w.Poll()
	if got := f.applied(); got != "[[two]]" {
		t.Fatalf("no overlap: applied %s", got)
	}
}

// A bad, empty, unreadable or refused file keeps the previous values; each
// is logged and counted once, however often it is read; the file set
// right again is applied.
func TestWatcherKeepsValuesOfABadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secret")
	put := func(content string) {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	put("one\n")
	f := newFixture(t, time.Hour, File{Variable: "WHGUARD_PAY_SECRET_FILE", Path: path, Parse: lines, Initial: []string{"one"}})
	steps := []struct {
		name   string
		do     func()
		errors float64
	}{
		{"emptied", func() { put("") }, 1},
		{"read again", func() {}, 1},
		{"a bad line", func() { put("bad\n") }, 2},
		{"removed", func() { os.Remove(path) }, 3},
		{"too large", func() { put(string(bytes.Repeat([]byte("x"), maxFileBytes+1))) }, 4},
		{"refused by the scheme", func() { put("two\n"); f.refuse = true }, 5},
	}
	for _, s := range steps {
		s.do()
		f.w.Poll()
		f.w.Poll()
		if f.applied() != "" || f.count(ResultError) != s.errors {
			t.Fatalf("%s: applied %q, errors %v (want %v)", s.name, f.applied(), f.count(ResultError), s.errors)
		}
	}
	if n := f.logs.FilterMessageSnippet("previous values stay").Len(); n != 5 {
		t.Errorf("%d warnings, want 5", n)
	}
	f.refuse = false
	put("three\n")
	f.w.Poll()
	if got := f.applied(); got != "[[three one]]" || f.count(ResultOK) != 1 {
		t.Fatalf("set right again: applied %s", got)
	}
	f.noValueLogged("one", "three", "bad")
}

// A file the configuration took without values (an empty SECRET_FILE
// beside SECRET) is no error when the first read finds it still so: an
// alert on errors would fire at every start. It is one once it changes to
// something unusable, and applied once it holds values.
func TestWatcherFirstReadOfAFileTakenEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret")
	put := func(content string) {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	put("\n")
	f := newFixture(t, time.Hour, File{Variable: "WHGUARD_PAY_SECRET_FILE", Path: path, Parse: lines})
	f.w.Poll()
	if f.count(ResultError) != 0 || f.logs.FilterMessageSnippet("previous values stay").Len() != 0 || f.applied() != "" {
		t.Fatalf("first read of the file as configured: errors %v, applied %q", f.count(ResultError), f.applied())
	}
	put("bad\n")
	f.w.Poll()
	if f.count(ResultError) != 1 || f.applied() != "" {
		t.Fatalf("a bad line: errors %v, applied %q", f.count(ResultError), f.applied())
	}
	put("one\n")
	f.w.Poll()
	if f.applied() != "[[one]]" || f.count(ResultOK) != 1 {
		t.Fatalf("values: applied %q", f.applied())
	}
}

// A file the configuration took empty that holds something unusable by
// the first read (written in between) is an error, counted and logged
// (found: the first read's refusal was silent whatever the content).
func TestWatcherFirstReadOfAFileTakenEmptyThatChanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte("bad\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, time.Hour, File{Variable: "WHGUARD_PAY_SECRET_FILE", Path: path, Parse: lines})
	f.w.Poll()
	if f.count(ResultError) != 1 || f.logs.FilterMessageSnippet("previous values stay").Len() != 1 || f.applied() != "" {
		t.Fatalf("first read of a file changed to a bad line: errors %v, applied %q", f.count(ResultError), f.applied())
	}
}

// Several files of one provider are applied together: a change to one
// keeps the others' values.
func TestWatcherAppliesEveryFileOfTheProvider(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.WriteFile(a, []byte("a1\n"), 0o600)
	os.WriteFile(b, []byte("b1\n"), 0o600)
	f := newFixture(t, time.Hour,
		File{Variable: "A", Path: a, Parse: lines, Initial: []string{"a1"}},
		File{Variable: "B", Path: b, Parse: lines, Initial: []string{"b1"}})
	os.WriteFile(b, []byte("b2\n"), 0o600)
	f.w.Poll()
	if got := f.applied(); got != "[[a1] [b2 b1]]" {
		t.Fatalf("applied %s", got)
	}
}

// Start reads at each interval until Stop; both are safe to call twice.
func TestWatcherStartStop(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secret")
	os.WriteFile(path, []byte("one\n"), 0o600)
	f := newFixture(t, 0, File{Variable: "WHGUARD_PAY_SECRET_FILE", Path: path, Parse: lines, Initial: []string{"one"}})
	f.w.cfg.Interval = 10 * time.Millisecond
	ctx := context.Background()
	if err := f.w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	_ = f.w.Start(ctx)
	os.WriteFile(path, []byte("two\n"), 0o600)
	if !testwait.Until(5*time.Second, testwait.Poll, func() bool { return f.applied() == "[[two]]" }) {
		t.Fatalf("not applied: %s", f.applied())
	}
	if err := f.w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}
