package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/whguard/whguard/verify"
)

// validateResign returns whether the provider re-signs: RESIGN when set,
// else whether its scheme can. Asking a scheme that cannot is an error,
// and so is RESIGN=false beside a backend secret (backendVar, "" when
// none is set), which only re-signing uses.
func (p *providerConfig) validateResign(ps *problems, backendVar string) bool {
	can := p.provider.CanResign()
	switch {
	case backendVar != "" && p.env.Resign != nil && !*p.env.Resign:
		ps.addf(p.prefix+backendVar, "set with %sRESIGN=false, which forwards the sender's signature as received: "+
			"the backend secret signs re-signed deliveries only; unset one of them", p.prefix)
		return false
	case p.env.Resign == nil:
		return can
	case !*p.env.Resign || can:
		return *p.env.Resign
	case p.env.Scheme == verify.SchemeHMAC:
		ps.addf(p.prefix+"RESIGN", "scheme hmac re-signs only with a signed timestamp (%sTIMESTAMP_HEADER); without one its signatures never expire: leave it unset or set false", p.prefix)
	case verify.ResignSupport(p.env.Scheme) == verify.ResignNotNeeded:
		ps.addf(p.prefix+"RESIGN", "scheme %s signs no timestamp, so its signatures never expire and are forwarded as received: leave it unset or set false", p.env.Scheme)
	default:
		ps.addf(p.prefix+"RESIGN", "scheme %s cannot be re-signed: %s; leave it unset or set false", p.env.Scheme, verify.ResignSupport(p.env.Scheme))
	}
	return false
}

// backendSecret reads BACKEND_SECRET, or the first non-blank line of
// BACKEND_SECRET_FILE, without surrounding whitespace (removed with a
// warning from the variable), and the variable (after the prefix) it came
// from; "" and "" when neither is set or it cannot be read (reported to
// ps). The provider's scheme decodes and checks it (verify.NewProvider).
// Nothing said names its value.
func (p *providerConfig) backendSecret(ps *problems) (secret, from string, warnings []string) {
	switch {
	case p.env.BackendSecret != "" && p.env.BackendSecretFile != "":
		ps.addf(p.prefix+"BACKEND_SECRET", "set together with %sBACKEND_SECRET_FILE: set one", p.prefix)
		return "", "", nil
	case p.env.BackendSecret != "":
		secret = strings.TrimSpace(p.env.BackendSecret)
		if secret == "" {
			ps.addf(p.prefix+"BACKEND_SECRET", "holds only whitespace; expected the secret the backend verifies deliveries with")
			return "", "", nil
		}
		if isPlaceholder(secret) {
			ps.addf(p.prefix+"BACKEND_SECRET", "%s", placeholderProblem)
			return "", "", nil
		}
		if secret != p.env.BackendSecret {
			warnings = append(warnings, fmt.Sprintf("%sBACKEND_SECRET: whitespace around the secret removed (a trailing newline from a file or a copy-paste?)", p.prefix))
		}
		return secret, "BACKEND_SECRET", warnings
	case p.env.BackendSecretFile != "":
		b, err := os.ReadFile(p.env.BackendSecretFile)
		if err != nil {
			ps.addf(p.prefix+"BACKEND_SECRET_FILE", "cannot read the file: %v; expected a readable file holding the backend's secret", errors.Unwrap(err))
			return "", "", nil
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if secret = strings.TrimSpace(sc.Text()); secret != "" {
				if isPlaceholder(secret) {
					ps.addf(p.prefix+"BACKEND_SECRET_FILE", "%s", placeholderProblem)
					return "", "", nil
				}
				return secret, "BACKEND_SECRET_FILE", nil
			}
		}
		ps.addf(p.prefix+"BACKEND_SECRET_FILE", "the file holds no secret; expected the backend's secret on its first non-blank line")
	}
	return "", "", nil
}
