package verify

import (
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// What Diagnose reads of a refused request's headers: which scheme's
// signature header it carries, the signature tokens of a header and the
// millisecond timestamps in it.

// schemeSignatureHeaders names, per scheme, the headers that carry its
// signature or credential, the one that tells the scheme apart first. A
// scheme that signs inside the body (mailgun, msgraph, adyen), whose
// credential travels in a header any request may carry (postmark and okta:
// Authorization; pubsub: a bearer token), or whose header is configured
// (hmac: signatureHeaders reads it) has none here.
var schemeSignatureHeaders = map[string][]string{
	SchemeStandard:  {"Webhook-Signature"},
	SchemeSvix:      {"Svix-Signature", "Webhook-Signature"},
	SchemeStripe:    {stripeSignatureHeader},
	SchemeGitHub:    {githubSignatureHeader},
	SchemeSlack:     {slackSignatureHeader},
	SchemeShopify:   {shopifySignatureHeader},
	SchemeTwilio:    {twilioSignatureHeader},
	SchemePaddle:    {paddleSignatureHeader},
	SchemeLinear:    {linearSignatureHeader},
	SchemeIntercom:  {intercomSignatureHeader},
	SchemeZoom:      {zoomSignatureHeader},
	SchemeSquare:    {squareSignatureHeader},
	SchemeSendGrid:  {sendGridSignatureHeader},
	SchemePagerDuty: {pagerDutySignatureHeader},
	SchemeDiscord:   {discordSignatureHeader},
	SchemeGitLab:    {gitLabTokenHeader},
	SchemeTypeform:  {typeformSpec.header},
	SchemeRazorpay:  {razorpaySpec.header},
	SchemeVercel:    {vercelSpec.header},
	SchemeBitbucket: {bitbucketSpec.header},
	SchemeAtlassian: {atlassianSpec.header},
	SchemeMeta:      {metaSpec.header},
	SchemeSentry:    {sentrySpec.header},
	SchemePaystack:  {paystackSpec.header},
	SchemeTwitter:   {twitterSpec.header},
	SchemeTwitch:    {twitchSignatureHeader},
	SchemeCalendly:  {calendlySignatureHeader},
	SchemeZendesk:   {zendeskSignatureHeader},
	SchemeWorkOS:    {workosSignatureHeader},
	SchemeHubSpot:   {hubspotSignatureHeader},
	SchemeTelegram:  {telegramTokenHeader},
	SchemeSNS:       {"X-Amz-Sns-Message-Type"},
}

// signatureHeaders returns the headers p's signature travels in (nil when
// the scheme has none of its own).
func signatureHeaders(p *Provider) []string {
	switch s := p.keys.Load().verifier.(type) {
	case *hmacScheme:
		return []string{s.sigHeader}
	case hmacTimestampScheme:
		return []string{s.sigHeader}
	}
	return schemeSignatureHeaders[p.scheme]
}

// present returns the first of names that h carries ("" if none).
func present(h http.Header, names []string) string {
	for _, n := range names {
		if h.Get(n) != "" {
			return n
		}
	}
	return ""
}

// otherSchemeHeader returns the first scheme signature header h carries
// that is not one of scheme's, with every scheme (in registry order) that
// uses it.
func otherSchemeHeader(h http.Header, scheme string) (header string, schemes []string) {
	for _, spec := range registry {
		hs := schemeSignatureHeaders[spec.name]
		if spec.name == scheme || len(hs) == 0 || h.Get(hs[0]) == "" {
			continue
		}
		if header == "" {
			header = hs[0]
		}
		if hs[0] == header {
			schemes = append(schemes, spec.name)
		}
	}
	return header, schemes
}

// maxDiagnosedHeaders bounds how many headers a diagnosis reads.
const maxDiagnosedHeaders = 32

// boundedNames returns up to maxDiagnosedHeaders of h's names, sorted.
func boundedNames(h http.Header) []string {
	names := make([]string, 0, len(h))
	for n := range h {
		names = append(names, n)
	}
	slices.Sort(names)
	return names[:min(len(names), maxDiagnosedHeaders)]
}

// maxTokens bounds the candidates one header value yields.
const maxTokens = 4

// sigToken is a signature-shaped token of a header value, v[start:end],
// with its other encoding.
type sigToken struct {
	start, end int
	other      string
	base64     bool // the token is base64 (other is hex)
}

// macSizes are the MAC lengths of the schemes (SHA-1, SHA-256, SHA-512).
var macSizes = []int{20, 32, 64}

// signatureTokens finds the tokens of v (maximal runs of the base64
// alphabet with their padding) that are a MAC in hex or in standard
// base64, and gives each in the other encoding (base64 padded, hex lower
// case).
func signatureTokens(v string) []sigToken {
	var out []sigToken
	for i := 0; i < len(v) && len(out) < maxTokens; {
		if !isBase64Char(v[i]) {
			i++
			continue
		}
		j := i
		for j < len(v) && isBase64Char(v[j]) {
			j++
		}
		end := j
		for end < len(v) && end-j < 2 && v[end] == '=' {
			end++
		}
		tok := v[i:end]
		if b, err := hex.DecodeString(tok); err == nil && slices.Contains(macSizes, len(b)) {
			out = append(out, sigToken{start: i, end: end, other: base64.StdEncoding.EncodeToString(b)})
		} else if b, err := base64.StdEncoding.Strict().DecodeString(tok); err == nil && slices.Contains(macSizes, len(b)) {
			out = append(out, sigToken{start: i, end: end, other: hex.EncodeToString(b), base64: true})
		}
		i = end
	}
	return out
}

func isBase64Char(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || isDigit(c) || c == '+' || c == '/'
}

// millisRun is a run of 13 digits of v, v[start:end], read as a time in
// milliseconds; seconds is that time in unix seconds.
type millisRun struct {
	start, end int
	seconds    string
}

// millisWindow is how near now a 13-digit number must be, read as
// milliseconds, to be taken for a timestamp.
const millisWindow = 24 * time.Hour

// millisRuns finds the runs of exactly 13 digits in v that, read as unix
// milliseconds, lie within millisWindow of now.
func millisRuns(v string, now time.Time) []millisRun {
	var out []millisRun
	for i := 0; i < len(v) && len(out) < maxTokens; {
		if !isDigit(v[i]) {
			i++
			continue
		}
		j := i
		for j < len(v) && isDigit(v[j]) {
			j++
		}
		if j-i == 13 {
			ms, err := strconv.ParseInt(v[i:j], 10, 64)
			if at := time.UnixMilli(ms); err == nil && at.Sub(now).Abs() <= millisWindow {
				out = append(out, millisRun{start: i, end: j, seconds: strconv.FormatInt(ms/1000, 10)})
			}
		}
		i = j
	}
	return out
}
