package verify

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// A provider's credentials (secrets, public keys, backend secrets) are
// the only part of it that changes after NewProvider: a secret rotated in
// a mounted file is taken while whguard runs (Rekey). What is built from
// them sits behind one atomic pointer that each call reads once.

// Keys are the credentials of a provider that may be replaced while it
// runs (Provider.Rekey), each list current first: Secrets as
// ProviderConfig.Secrets, PublicKeys as PublicKey then PreviousPublicKeys,
// BackendSecrets as BackendSecret then PreviousBackendSecrets.
type Keys struct {
	Secrets        []string
	PublicKeys     []string
	BackendSecrets []string
}

// withKeys is cfg holding k's credentials.
func (cfg ProviderConfig) withKeys(k Keys) ProviderConfig {
	cfg.Secrets = k.Secrets
	cfg.PublicKey, cfg.PreviousPublicKeys = "", nil
	if len(k.PublicKeys) > 0 {
		cfg.PublicKey, cfg.PreviousPublicKeys = k.PublicKeys[0], k.PublicKeys[1:]
	}
	cfg.BackendSecret, cfg.PreviousBackendSecrets = "", nil
	if len(k.BackendSecrets) > 0 {
		cfg.BackendSecret, cfg.PreviousBackendSecrets = k.BackendSecrets[0], k.BackendSecrets[1:]
	}
	return cfg
}

// keyed is what a provider builds from its credentials.
type keyed struct {
	verifier Scheme
	// older verify with ProviderConfig.PreviousPublicKeys, tried in turn
	// when verifier finds the signature does not match.
	older []Scheme
	// crcKey answers a CRC challenge: the current secret.
	crcKey []byte
	// signer signs deliveries for the backend (Resign): the scheme itself
	// (the sender's secrets), or with a backend secret a second instance of
	// it holding the backend secrets alone; nil when the scheme cannot
	// re-sign.
	signer resigner
}

// verify checks in with the current key, then, on a signature mismatch,
// with each previous public key.
func (k *keyed) verify(in Input, now time.Time) (Verified, error) {
	v, err := k.verifier.Verify(in, now)
	if err == nil || len(k.older) == 0 || Reason(err) != ReasonSignatureMismatch {
		return v, err
	}
	for _, o := range k.older {
		if ov, oerr := o.Verify(in, now); oerr == nil {
			return ov, nil
		}
	}
	return v, err
}

// buildKeys builds what depends on cfg's credentials: the scheme (the
// error of its build first in errs), one instance per previous public key,
// and the backend signer.
func buildKeys(spec *schemeSpec, cfg ProviderConfig, tolerance time.Duration) (*keyed, []error) {
	v, err := spec.build(cfg, tolerance)
	errs := []error{err}
	k := &keyed{verifier: v}
	k.signer, _ = v.(resigner)
	if cfg.BackendSecret != "" {
		k.signer, err = backendSigner(spec, cfg, tolerance, v)
		errs = append(errs, err)
	}
	for i, key := range cfg.PreviousPublicKeys {
		pcfg := cfg
		pcfg.PublicKey, pcfg.PreviousPublicKeys = key, nil
		o, err := spec.build(pcfg, tolerance)
		if err != nil {
			for _, fe := range FieldErrors(err) {
				if fe.Field == FieldPublicKey {
					// Index 0 is PublicKey itself.
					errs = append(errs, &FieldError{Field: FieldPublicKey, Index: i + 1, Err: fmt.Errorf("key %d of %d: %w", i+2, len(cfg.PreviousPublicKeys)+1, fe.Err)})
				}
			}
			continue
		}
		k.older = append(k.older, o)
	}
	if len(cfg.Secrets) > 0 && slices.ContainsFunc(spec.challenges, func(c challenge) bool { return c.answer == answerCRC }) {
		k.crcKey = []byte(cfg.Secrets[0]) // the current secret answers a CRC
	}
	return k, errs
}

// Rekey replaces the provider's credentials with k, for the requests
// checked and the deliveries signed from then on; the other settings stay
// as NewProvider was given them. k is checked as NewProvider checks them;
// when it is refused, the error (FieldErrors naming Secrets, PublicKey or
// BackendSecret, never a value) is returned and the provider keeps its
// credentials. A provider built with a backend secret must keep one, and
// one built without cannot gain one: whether deliveries are signed with a
// backend secret is settled at start-up.
func (p *Provider) Rekey(k Keys) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	cfg := p.cfg.withKeys(k)
	var errs []error
	if missing := p.spec.missing(cfg); len(missing) > 0 {
		errs = append(errs, missing...)
	} else if (cfg.BackendSecret != "") != p.backendSigned {
		errs = append(errs, fieldErrorf(FieldBackendSecret, "a backend secret can be replaced, not added or removed, while whguard runs"))
	} else {
		var keys *keyed
		keys, errs = buildKeys(p.spec, cfg, p.tolerance)
		if errors.Join(errs...) == nil {
			p.keys.Store(keys)
			return nil
		}
	}
	return fmt.Errorf("rekey provider %q: %w", p.name, errors.Join(errs...))
}
