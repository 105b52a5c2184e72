package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/whguard/whguard/internal/rotation"
)

// defaultRotationOverlap is how long the values a watched file held
// before it changed stay accepted when ROTATION_OVERLAP is unset: long
// enough for a sender's retries signed with the old secret, and for the
// backend to be given the new one.
const defaultRotationOverlap = time.Hour

// fileValues are the non-blank lines of a secret or key file, without the
// whitespace around them (the line ending is not part of a line), and
// whether a line had other whitespace around it.
func fileValues(b []byte) (values []string, spaced bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		v := strings.TrimSpace(line)
		if v == "" {
			continue
		}
		spaced = spaced || v != line
		values = append(values, v)
	}
	return values, spaced
}

// validateOverlap reads ROTATION_OVERLAP into p.overlap.
func (p *providerConfig) validateOverlap(ps *problems) (warnings []string) {
	p.overlap = defaultRotationOverlap
	if p.env.RotationOverlap == nil {
		return nil
	}
	if *p.env.RotationOverlap < 0 {
		ps.addf(p.prefix+"ROTATION_OVERLAP", "negative (%s); expected 0 (the previous secrets refused at once) or a positive Go duration such as 1h", *p.env.RotationOverlap)
		return nil
	}
	p.overlap = *p.env.RotationOverlap
	if p.env.SecretFile == "" && p.env.PublicKeyFile == "" && p.env.BackendSecretFile == "" {
		warnings = append(warnings, fmt.Sprintf("%sROTATION_OVERLAP has no effect without %sSECRET_FILE, %sPUBLIC_KEY_FILE or %sBACKEND_SECRET_FILE",
			p.prefix, p.prefix, p.prefix, p.prefix))
	}
	return warnings
}

// loadPublicKeys reads PUBLIC_KEY, or the non-blank lines of
// PUBLIC_KEY_FILE (current first), without surrounding whitespace; the
// scheme decodes them (verify.NewProvider). ok is false when a problem
// was reported.
func (p *providerConfig) loadPublicKeys(ps *problems) (keys []string, ok bool) {
	switch {
	case p.env.PublicKey != "" && p.env.PublicKeyFile != "":
		ps.addf(p.prefix+"PUBLIC_KEY", "set together with %sPUBLIC_KEY_FILE: set one", p.prefix)
		return nil, false
	case p.env.PublicKey != "":
		return []string{p.env.PublicKey}, true
	case p.env.PublicKeyFile != "":
		b, err := os.ReadFile(p.env.PublicKeyFile)
		if err != nil {
			ps.addf(p.prefix+"PUBLIC_KEY_FILE", "cannot read the file: %v; expected a readable file with the public key (one per line, current first)", errors.Unwrap(err))
			return nil, false
		}
		keys, err := publicKeyValues(b)
		if err != nil {
			ps.addf(p.prefix+"PUBLIC_KEY_FILE", "%v", err)
			return nil, false
		}
		return keys, true
	}
	return nil, true
}

// The parsers of a watched file's content, as start-up reads it. Their
// errors never quote a value.

// secretValues: one secret per line, current first.
func secretValues(b []byte) ([]string, error) {
	return checkedValues(b, "secret", "one secret per line, current first")
}

// publicKeyValues: one public key per line, current first.
func publicKeyValues(b []byte) ([]string, error) {
	return checkedValues(b, "public key", "the public key, one per line, current first")
}

// backendSecretValue: the first non-blank line.
func backendSecretValue(b []byte) ([]string, error) {
	values, err := checkedValues(b, "secret", "the backend's secret on its first non-blank line")
	if err != nil {
		return nil, err
	}
	return values[:1], nil
}

func checkedValues(b []byte, what, expected string) ([]string, error) {
	values, _ := fileValues(b)
	if len(values) == 0 {
		return nil, fmt.Errorf("the file holds no %s; expected %s", what, expected)
	}
	if slices.ContainsFunc(values, isPlaceholder) {
		return nil, fmt.Errorf("the file %s", placeholderProblem)
	}
	return values, nil
}

// watchedFiles lists, per provider, the files read again while whguard
// runs (SECRET_FILE, PUBLIC_KEY_FILE, BACKEND_SECRET_FILE), each with
// what start-up read from it, and how a change is applied: the provider
// is rekeyed with the files' accepted values in place of their part of
// the start-up keys (SECRET and SECRET_PREVIOUS stay around
// SECRET_FILE's).
func (c *config) watchedFiles() []rotation.Provider {
	var out []rotation.Provider
	for i := range c.providers {
		p := &c.providers[i]
		if p.provider == nil {
			continue
		}
		w := rotation.Provider{Name: p.name, Overlap: p.overlap}
		secretAt, keyAt, backendAt := -1, -1, -1
		add := func(key, path string, parse func([]byte) ([]string, error), initial []string) int {
			w.Files = append(w.Files, rotation.File{Variable: p.prefix + key, Path: path, Parse: parse, Initial: initial})
			return len(w.Files) - 1
		}
		if p.env.SecretFile != "" {
			secretAt = add("SECRET_FILE", p.env.SecretFile, secretValues, p.secretsByVar[1])
		}
		if p.env.PublicKeyFile != "" {
			keyAt = add("PUBLIC_KEY_FILE", p.env.PublicKeyFile, publicKeyValues, p.keys.PublicKeys)
		}
		if p.env.BackendSecretFile != "" && len(p.keys.BackendSecrets) > 0 {
			backendAt = add("BACKEND_SECRET_FILE", p.env.BackendSecretFile, backendSecretValue, p.keys.BackendSecrets)
		}
		if len(w.Files) == 0 {
			continue
		}
		start, prov := p.keys, p.provider
		head, tail := p.secretsByVar[0], p.secretsByVar[2]
		w.Apply = func(accepted [][]string) error {
			k := start
			if secretAt >= 0 {
				k.Secrets = slices.Concat(head, accepted[secretAt], tail)
			}
			if keyAt >= 0 {
				k.PublicKeys = accepted[keyAt]
			}
			if backendAt >= 0 {
				k.BackendSecrets = accepted[backendAt]
			}
			return prov.Rekey(k)
		}
		out = append(out, w)
	}
	return out
}

// newRotation is the watcher of the providers' secret and key files, nil
// when no provider has one.
func newRotation(cfg *config, reg prometheus.Registerer, log *zap.Logger) (*rotation.Watcher, error) {
	providers := cfg.watchedFiles()
	if len(providers) == 0 {
		return nil, nil
	}
	for _, p := range providers {
		vars := make([]string, len(p.Files))
		for i, f := range p.Files {
			vars[i] = f.Variable
		}
		log.Info("secret files watched", zap.String("provider", p.Name), zap.Strings("variables", vars), zap.Duration("overlap", p.Overlap))
	}
	w, err := rotation.New(rotation.Config{Providers: providers, Metrics: rotation.NewMetrics(reg), Logger: log})
	if err != nil {
		return nil, fmt.Errorf("secret files: %w", err)
	}
	return w, nil
}
