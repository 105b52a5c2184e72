package verify

import (
	"crypto/hmac"
	"crypto/sha1" // HMAC-SHA1, still used by some in-house senders, is not broken as a MAC
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strings"
	"time"

	"github.com/whguard/whguard/internal/fields"
)

// hmacPart is one piece of a signed-content template.
type hmacPart uint8

const (
	hmacPartLiteral   hmacPart = iota // text copied as is
	hmacPartID                        // {id}: the value of the IDHeader header
	hmacPartTimestamp                 // {timestamp}: the TimestampHeader value as received
	hmacPartBody                      // {body}: the exact received bytes
)

// hmacSegment is a literal or a placeholder of the template.
type hmacSegment struct {
	part    hmacPart
	literal string
}

// hmacScheme is the generic scheme for in-house senders (WHGUARD_<NAME>_*):
//
//	SignatureHeader: Prefix + encode(HMAC-<Algorithm>(secret, SignedContent))
//
// with the secret used as raw bytes, Encoding hex (either case) or base64
// (standard alphabet, padded), and SignedContent a template over {id},
// {timestamp} and {body}. The header holds exactly one signature: a list
// (comma- or space-separated, as some senders send during a rotation) is
// refused; rotate by configuring the previous secret instead
// (WHGUARD_<NAME>_SECRET_PREVIOUS), which is tried as well.
type hmacScheme struct {
	keys      [][]byte
	newHash   func() hash.Hash
	size      int // the MAC length in bytes
	base64    bool
	prefix    string
	sigHeader string
	tsHeader  string // "" when the sender signs no timestamp
	idHeader  string // read only when the template has {id}
	template  []hmacSegment
	usesID    bool
	tolerance time.Duration
}

var _ Scheme = (*hmacScheme)(nil)

func newHMACScheme(cfg ProviderConfig, tolerance time.Duration) (Scheme, error) {
	// Every problem is reported, each naming its own setting.
	keys, err := secretKeys(cfg.Secrets, rawSecret)
	errs := []error{err}
	c := cfg.HMAC
	s := &hmacScheme{keys: keys, prefix: c.Prefix, sigHeader: c.SignatureHeader, tsHeader: c.TimestampHeader,
		idHeader: cfg.IDHeader, tolerance: tolerance}

	switch strings.ToLower(c.Algorithm) {
	case "", "sha256":
		s.newHash = sha256.New
	case "sha512":
		s.newHash = sha512.New
	case "sha1":
		s.newHash = sha1.New
	default:
		errs = append(errs, fieldErrorf(FieldHMACAlgorithm, "HMAC algorithm must be sha256 (the default), sha512 or sha1"))
	}
	if s.newHash != nil {
		s.size = s.newHash().Size()
	}

	switch {
	case !fields.HeaderName(c.SignatureHeader): // set: the registry checked
		errs = append(errs, fieldErrorf(FieldSignatureHeader, "HMAC signature header is not a valid header name (%s)", fields.HeaderNameHint))
	}
	if c.TimestampHeader != "" && !fields.HeaderName(c.TimestampHeader) {
		errs = append(errs, fieldErrorf(FieldTimestampHeader, "HMAC timestamp header is not a valid header name (%s)", fields.HeaderNameHint))
	}

	switch strings.ToLower(c.Encoding) {
	case "", "hex":
	case "base64":
		s.base64 = true
	default:
		errs = append(errs, fieldErrorf(FieldSignatureEncoding, "HMAC signature encoding must be hex (the default) or base64"))
	}

	content := c.SignedContent
	if content == "" {
		content = "{body}"
	}
	s.template, err = parseHMACTemplate(content)
	if err != nil {
		return nil, errors.Join(append(errs, err)...)
	}
	var usesTS, usesBody bool
	for _, seg := range s.template {
		switch seg.part {
		case hmacPartID:
			s.usesID = true
		case hmacPartTimestamp:
			usesTS = true
		case hmacPartBody:
			usesBody = true
		}
	}
	if !usesBody {
		// Otherwise any body would pass with a valid signature.
		errs = append(errs, fieldErrorf(FieldSignedContent, "HMAC signed content template must contain {body}"))
	}
	switch {
	case usesTS && c.TimestampHeader == "":
		errs = append(errs, fieldErrorf(FieldSignedContent, "HMAC signed content template uses {timestamp} but no timestamp header is configured"))
	case !usesTS && c.TimestampHeader != "":
		// An unsigned timestamp proves nothing: anyone could refresh it.
		errs = append(errs, fieldErrorf(FieldSignedContent, "HMAC timestamp header is configured but the signed content template does not use {timestamp}"))
	}
	if s.usesID && cfg.IDHeader == "" {
		errs = append(errs, fieldErrorf(FieldSignedContent, "HMAC signed content template uses {id} but no ID header is configured"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if s.tsHeader != "" {
		return hmacTimestampScheme{s}, nil
	}
	return s, nil
}

// parseHMACTemplate splits a signed-content template into literals and the
// placeholders {id}, {timestamp} and {body}. Every '{' must open one of
// them (there is no escape); a lone '}' is literal text. Errors give the
// byte offset, not the text.
func parseHMACTemplate(t string) ([]hmacSegment, error) {
	var segs []hmacSegment
	for i := 0; i < len(t); {
		open := strings.IndexByte(t[i:], '{')
		if open < 0 {
			segs = append(segs, hmacSegment{part: hmacPartLiteral, literal: t[i:]})
			break
		}
		if open > 0 {
			segs = append(segs, hmacSegment{part: hmacPartLiteral, literal: t[i : i+open]})
		}
		start := i + open
		end := strings.IndexByte(t[start:], '}')
		if end < 0 {
			return nil, fieldErrorf(FieldSignedContent, "HMAC signed content template: unclosed '{' at byte %d (known placeholders: {id}, {timestamp}, {body})", start)
		}
		var part hmacPart
		switch t[start+1 : start+end] {
		case "id":
			part = hmacPartID
		case "timestamp":
			part = hmacPartTimestamp
		case "body":
			part = hmacPartBody
		default:
			return nil, fieldErrorf(FieldSignedContent, "HMAC signed content template: unknown placeholder at byte %d (known: {id}, {timestamp}, {body})", start)
		}
		segs = append(segs, hmacSegment{part: part})
		i = start + end + 1
	}
	return segs, nil
}

// Verify checks the timestamp (when a timestamp header is configured) and
// the signature over the filled-in template. It returns no id (Check uses
// the IDHeader or the content digest) and no type.
func (s *hmacScheme) Verify(in Input, now time.Time) (Verified, error) {
	header := in.Header.Get(s.sigHeader)
	if header == "" {
		return Verified{}, missingHeader(s.sigHeader)
	}
	var ts, id string
	if s.tsHeader != "" {
		if ts = in.Header.Get(s.tsHeader); ts == "" {
			return Verified{}, missingHeader(s.tsHeader)
		}
	}
	if s.usesID {
		if id = in.Header.Get(s.idHeader); id == "" {
			return Verified{}, missingHeader(s.idHeader)
		}
	}
	if err := checkHeaderLen(s.sigHeader, header); err != nil {
		return Verified{}, err
	}
	if s.tsHeader != "" {
		unix, ok := parseUnixSeconds(ts)
		if !ok {
			return Verified{}, refusef(ReasonMalformedHeader, "%w: malformed %s header", ErrUnauthorized, s.tsHeader)
		}
		if err := checkTimestamp(unix, now, s.tolerance); err != nil {
			return Verified{}, err
		}
	}
	var sigBuf [sha512.Size + 2]byte
	sig, err := s.decodeSignature(header, sigBuf[:])
	if err != nil {
		return Verified{}, refusef(ReasonMalformedHeader, "%w: %s header: %w", ErrUnauthorized, s.sigHeader, err)
	}
	var sumBuf [sha512.Size]byte
	for _, key := range s.keys {
		if hmac.Equal(s.sign(sumBuf[:0], key, id, ts, in.Body), sig) {
			return Verified{}, nil
		}
	}
	return Verified{}, refusef(ReasonSignatureMismatch, "%w: no signature matches", ErrUnauthorized)
}

// sign appends to dst the MAC of the template filled in with id, ts and
// body.
func (s *hmacScheme) sign(dst, key []byte, id, ts string, body []byte) []byte {
	mac := hmac.New(s.newHash, key)
	for _, seg := range s.template {
		switch seg.part {
		case hmacPartLiteral:
			mac.Write([]byte(seg.literal))
		case hmacPartID:
			mac.Write([]byte(id))
		case hmacPartTimestamp:
			mac.Write([]byte(ts))
		case hmacPartBody:
			mac.Write(body)
		}
	}
	return mac.Sum(dst)
}

// decodeSignature strips the prefix (required when configured) and decodes
// exactly one MAC of s.size bytes into buf (at least s.size+2 bytes long).
func (s *hmacScheme) decodeSignature(header string, buf []byte) ([]byte, error) {
	value, ok := strings.CutPrefix(header, s.prefix)
	if !ok {
		return nil, fmt.Errorf("expected the %s prefix", s.prefix)
	}
	if s.base64 {
		enc := base64.StdEncoding.Strict()
		if len(value) != enc.EncodedLen(s.size) {
			return nil, fmt.Errorf("expected one base64 signature of %d bytes", s.size)
		}
		if n, err := enc.Decode(buf, []byte(value)); err != nil || n != s.size {
			return nil, fmt.Errorf("expected one base64 signature of %d bytes", s.size)
		}
		return buf[:s.size], nil
	}
	if len(value) != hex.EncodedLen(s.size) {
		return nil, fmt.Errorf("expected one signature of %d hex digits", hex.EncodedLen(s.size))
	}
	if _, err := hex.Decode(buf, []byte(value)); err != nil {
		return nil, fmt.Errorf("expected one signature of %d hex digits", hex.EncodedLen(s.size))
	}
	return buf[:s.size], nil
}
