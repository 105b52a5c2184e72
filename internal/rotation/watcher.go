package rotation

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"go.uber.org/zap"
)

// DefaultInterval is how often the files are read by default.
//
// The files are polled, not watched with inotify: a Kubernetes Secret
// update replaces the ..data symbolic link of the mounted directory, and
// the file whguard was given (a link through ..data) is never written, so
// a watch on the file sees nothing, and one on the directory has to
// follow the links' renames; a Vault agent renames a new file over the
// old one, which ends a watch on the old one. Reading a few small files
// every two seconds follows every such swap through the path as given,
// and costs nothing next to the traffic.
const DefaultInterval = 2 * time.Second

// maxFileBytes bounds a watched file: a secret or key file is a few lines.
const maxFileBytes = 1 << 20

// File is one watched file.
type File struct {
	// Variable names the file in logs (WHGUARD_STRIPE_SECRET_FILE).
	Variable string
	// Path is read as given, following symbolic links.
	Path string
	// Parse reads the file's values, current first. An error refuses the
	// content (no value, a placeholder); its message never quotes a value.
	Parse func([]byte) ([]string, error)
	// Initial is what the file held when the configuration read it.
	Initial []string
}

// Provider is one provider's watched files.
type Provider struct {
	Name string
	// Overlap is how long the values a file held before stay accepted
	// (0: dropped at once).
	Overlap time.Duration
	Files   []File
	// Apply puts in use the values accepted from each file (indexed as
	// Files, current first). An error refuses them: the provider keeps
	// what it had. Its message never quotes a value.
	Apply func(accepted [][]string) error
}

// Config configures a Watcher.
type Config struct {
	Providers []Provider
	// Interval is how often the files are read; 0 means DefaultInterval.
	Interval time.Duration
	// Now is the clock the overlaps are measured with; nil means
	// time.Now.
	Now     func() time.Time
	Metrics *Metrics // nil: not counted
	Logger  *zap.Logger
}

// Watcher reads the providers' files every Interval and, when one holds
// other values, applies them with the values it held before still
// accepted for the provider's overlap; when an overlap ends, it applies
// the values without the expired ones. Each reload is logged (the
// variable and how many values, never a value) and counted: ok,
// unchanged (the file's bytes changed, its values did not), or error
// (unreadable, refused by Parse or Apply: the previous values stay).
type Watcher struct {
	cfg   Config
	state [][]fileState // by provider, by file

	cancel context.CancelFunc
	done   chan struct{}
}

// fileState is what the watcher knows of one file.
type fileState struct {
	held Held
	// seen identifies the last read (the content's digest, or the read
	// error): a file read again as it was is not reloaded again, so a bad
	// file is logged and counted once, not at every read.
	seen string
}

// New checks cfg and returns its watcher, not yet running.
func New(cfg Config) (*Watcher, error) {
	if cfg.Interval < 0 {
		return nil, fmt.Errorf("rotation: negative interval %v", cfg.Interval)
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	w := &Watcher{cfg: cfg}
	for _, p := range cfg.Providers {
		if p.Apply == nil || p.Overlap < 0 {
			return nil, fmt.Errorf("rotation: provider %s: no Apply, or a negative overlap", p.Name)
		}
		st := make([]fileState, len(p.Files))
		for i, f := range p.Files {
			if f.Parse == nil {
				return nil, fmt.Errorf("rotation: %s: no Parse", f.Variable)
			}
			st[i].held = Held{Current: slices.Clone(f.Initial)}
		}
		w.state = append(w.state, st)
		cfg.Metrics.init(p.Name)
	}
	return w, nil
}

// Start reads the files every Interval until Stop. A second call does
// nothing.
func (w *Watcher) Start(ctx context.Context) error {
	if w.cancel != nil {
		return nil
	}
	ctx, w.cancel = context.WithCancel(context.WithoutCancel(ctx))
	w.done = make(chan struct{})
	go w.loop(ctx)
	return nil
}

// Stop ends the reads and waits for the one under way within ctx.
func (w *Watcher) Stop(ctx context.Context) error {
	if w.cancel == nil {
		return nil
	}
	w.cancel()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("rotation: stop: %w", ctx.Err())
	}
}

func (w *Watcher) loop(ctx context.Context) {
	defer close(w.done)
	t := time.NewTicker(w.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.Poll()
		}
	}
}

// Poll reads every file once and applies what changed, as the loop does
// at each Interval. It must not run concurrently with itself (the loop
// calls it; tests call it without Start).
func (w *Watcher) Poll() {
	now := w.cfg.Now()
	for pi, p := range w.cfg.Providers {
		st := w.state[pi]
		w.expire(p, st, now)
		for fi := range p.Files {
			w.read(p, st, fi, now)
		}
	}
}

// expire drops the values whose overlap ended.
func (w *Watcher) expire(p Provider, st []fileState, now time.Time) {
	next := make([]Held, len(st))
	some := false
	for i := range st {
		var expired bool
		next[i], expired = st[i].held.Expire(now)
		some = some || expired
	}
	if !some {
		return
	}
	if err := p.Apply(accepted(next)); err != nil {
		// Dropping values leaves the current ones, which were applied:
		// not expected to fail. Tried again at the next read.
		w.cfg.Logger.Error("rotation overlap ended but the provider refused its current values", zap.String("provider", p.Name), zap.Error(err))
		return
	}
	for i := range st {
		if dropped := len(st[i].held.Retired) - len(next[i].Retired); dropped > 0 {
			w.cfg.Logger.Info("rotation overlap ended: the values the file held before are no longer accepted",
				zap.String("provider", p.Name), zap.String("variable", p.Files[i].Variable), zap.Int("dropped", dropped))
		}
		st[i].held = next[i]
	}
}

// read reads file fi of p and applies its values when they changed.
func (w *Watcher) read(p Provider, st []fileState, fi int, now time.Time) {
	f := p.Files[fi]
	log := w.cfg.Logger.With(zap.String("provider", p.Name), zap.String("variable", f.Variable))
	b, err := readBounded(f.Path)
	seen := "error: "
	if err != nil {
		seen += err.Error()
	} else {
		sum := sha256.Sum256(b)
		seen = hex.EncodeToString(sum[:])
	}
	first := st[fi].seen == ""
	if seen == st[fi].seen {
		return
	}
	st[fi].seen = seen
	fail := func(msg string, err error) {
		log.Warn(msg+"; the previous values stay in use", zap.Error(err))
		w.cfg.Metrics.count(p.Name, ResultError)
	}
	if err != nil {
		fail("secret file unreadable", err)
		return
	}
	values, err := f.Parse(b)
	if err != nil {
		if first && len(f.Initial) == 0 && len(bytes.TrimSpace(b)) == 0 {
			// The configuration took the file without values (an empty
			// SECRET_FILE beside SECRET): found still empty, it is as
			// configured, not a failed reload. Anything else written
			// since is read as any change is.
			return
		}
		fail("secret file refused", err)
		return
	}
	if slices.Equal(values, st[fi].held.Current) {
		if !first { // the first read finds what the configuration read
			log.Info("secret file changed but holds the same values")
			w.cfg.Metrics.count(p.Name, ResultUnchanged)
		}
		return
	}
	next := make([]Held, len(st))
	for i := range st {
		next[i] = st[i].held
	}
	next[fi] = st[fi].held.Next(values, now, p.Overlap)
	if err := p.Apply(accepted(next)); err != nil {
		fail("secret file refused by the provider's scheme", err)
		return
	}
	st[fi].held = next[fi]
	fields := []zap.Field{zap.Int("values", len(values)), zap.Int("previous_accepted", len(next[fi].Retired))}
	if until := next[fi].Until(); !until.IsZero() {
		fields = append(fields, zap.Time("previous_accepted_until", until))
	}
	log.Info("secret file reloaded: its new values are in use", fields...)
	w.cfg.Metrics.count(p.Name, ResultOK)
}

// accepted lists each file's accepted values.
func accepted(hs []Held) [][]string {
	out := make([][]string, len(hs))
	for i, h := range hs {
		out[i] = h.Accepted()
	}
	return out
}

// errTooLarge: a file far larger than any secret or key file.
var errTooLarge = errors.New("larger than 1 MiB: not a secret or key file")

// readBounded reads path, following symbolic links, up to maxFileBytes.
func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxFileBytes {
		return nil, errTooLarge
	}
	return b, nil
}
