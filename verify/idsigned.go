package verify

// idSigner is implemented by schemes that know whether the configured id
// header is part of what they sign (the generic hmac scheme: {id}).
type idSigner interface {
	signsID() bool
}

func (s *hmacScheme) signsID() bool { return s.usesID }

// IDSigned reports whether the event id is covered by the signature: it
// comes from the signed body, its digest, or a signed header. When it is
// not, the same signed body can arrive under a fresh id as a new event;
// whguard then guards on the body (WHGUARD_<NAME>_BODY_GUARD). The none
// scheme signs nothing, so guarding its ids would add nothing: true.
func (p *Provider) IDSigned() bool {
	if p.scheme == SchemeNone {
		return true
	}
	if s, ok := p.keys.Load().verifier.(idSigner); ok && p.idHeader != "" {
		return s.signsID()
	}
	if p.idHeader != "" {
		return false // a configured id header is never signed otherwise
	}
	spec, _ := lookupScheme(p.scheme)
	return !spec.unsignedID
}
