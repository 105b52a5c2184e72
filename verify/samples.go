package verify

import (
	"bytes"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"math/big"
	"net/http"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/whguard/whguard/internal/fields"
)

// samplesFS holds one directory per scheme, samples/<scheme>/<name>.http,
// each a request as the provider sends it (docs/backend.md, "Trying it:
// whguard trigger"):
//
//	# type: <the event type whguard reads from it; empty when the scheme has none>
//	# any other comment line
//	Header-Name: value
//	…
//	<blank line>
//	<body, exactly as sent; the file's final newline is not part of it>
//
// Header values and the body may hold placeholders (samplePlaceholder),
// replaced by fresh values each time a sample is sent.
//
//go:embed samples
var samplesFS embed.FS

// Sample is one realistic request of a scheme's sender, before it is
// freshened and signed.
type Sample struct {
	// Scheme is the scheme whose sender makes this request.
	Scheme string
	// Name is the sample's name: its file name without .http.
	Name string
	// Type is the event type the scheme reads from the request ("" for a
	// scheme that reports none, such as twilio).
	Type string
	// header and body are the templates, placeholders unreplaced.
	header http.Header
	body   []byte
}

// samplePlaceholder matches a placeholder: {{kind}} or {{kindN}}. Every
// occurrence of one placeholder text within a sample gets the same value
// (a header and the body can share an id); {{id}} and {{id2}} get
// different ones. The kinds:
//
//	id       24 random letters and digits
//	hex      32 random lower-case hex digits
//	sha      40 random lower-case hex digits (a git commit id)
//	uuid     a random UUID (version 4)
//	int      a random 10-digit number
//	unix     now, unix seconds
//	unix_ms  now, unix milliseconds
//	iso      now, RFC 3339 in UTC, whole seconds
//	iso_ms   now, RFC 3339 in UTC, with milliseconds
var samplePlaceholder = regexp.MustCompile(`\{\{([a-z_]+?)([0-9]*)\}\}`)

// sampleKinds lists the placeholder kinds (see samplePlaceholder).
var sampleKinds = map[string]func(now time.Time) string{
	"id":      func(time.Time) string { return randomText(24) },
	"hex":     func(time.Time) string { return randomHex(16) },
	"sha":     func(time.Time) string { return randomHex(20) },
	"uuid":    func(time.Time) string { return randomUUID() },
	"int":     func(time.Time) string { return randomInt10() },
	"unix":    func(now time.Time) string { return strconv.FormatInt(now.Unix(), 10) },
	"unix_ms": func(now time.Time) string { return strconv.FormatInt(now.UnixMilli(), 10) },
	"iso":     func(now time.Time) string { return now.UTC().Format(time.RFC3339) },
	"iso_ms":  func(now time.Time) string { return now.UTC().Format("2006-01-02T15:04:05.000Z07:00") },
}

// allSamples is every sample by scheme, in name order, read from
// samplesFS on first use (serve never needs them); reading them cannot fail
// once TestSamplesLoad passes.
var allSamples = sync.OnceValue(func() map[string][]Sample {
	out, err := loadSamples(samplesFS)
	if err != nil {
		panic(err)
	}
	return out
})

// loadSamples reads samples/<scheme>/<name>.http from fsys.
func loadSamples(fsys fs.FS) (map[string][]Sample, error) {
	files, err := fs.Glob(fsys, "samples/*/*.http")
	if err != nil {
		return nil, fmt.Errorf("list samples: %w", err)
	}
	slices.Sort(files)
	out := map[string][]Sample{}
	for _, f := range files {
		raw, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, fmt.Errorf("read sample %s: %w", f, err)
		}
		scheme := path.Base(path.Dir(f))
		s, err := parseSample(scheme, strings.TrimSuffix(path.Base(f), ".http"), raw)
		if err != nil {
			return nil, fmt.Errorf("sample %s: %w", f, err)
		}
		out[scheme] = append(out[scheme], s)
	}
	return out, nil
}

// parseSample reads one sample file (see samplesFS).
func parseSample(scheme, name string, raw []byte) (Sample, error) {
	head, body, ok := bytes.Cut(raw, []byte("\n\n"))
	if !ok {
		return Sample{}, fmt.Errorf("no blank line between the headers and the body")
	}
	s := Sample{Scheme: scheme, Name: name, header: http.Header{}, body: bytes.TrimSuffix(body, []byte("\n"))}
	typed := false
	for line := range strings.SplitSeq(string(head), "\n") {
		if c, ok := strings.CutPrefix(line, "#"); ok {
			if t, ok := strings.CutPrefix(strings.TrimSpace(c), "type:"); ok {
				s.Type, typed = strings.TrimSpace(t), true
			}
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok || !fields.HeaderName(k) {
			return Sample{}, fmt.Errorf("header line %q is not Name: value", line)
		}
		s.header.Add(k, strings.TrimSpace(v))
	}
	if !typed {
		return Sample{}, fmt.Errorf("no \"# type:\" line")
	}
	for _, text := range append([]string{string(s.body)}, sampleHeaderValues(s.header)...) {
		for _, m := range samplePlaceholder.FindAllStringSubmatch(text, -1) {
			if sampleKinds[m[1]] == nil {
				return Sample{}, fmt.Errorf("unknown placeholder %s", m[0])
			}
		}
	}
	return s, nil
}

func sampleHeaderValues(h http.Header) []string {
	var out []string
	for _, vs := range h {
		out = append(out, vs...)
	}
	return out
}

// Samples returns the samples of a scheme's sender, in name order (the
// first is the default one to send); nil for a scheme without any (the
// schemes whose senders sign with a key only they hold, SenderKeyHint).
func Samples(scheme string) []Sample {
	return slices.Clone(allSamples()[scheme])
}

// Fresh returns the sample's headers and body with every placeholder
// replaced: new random ids, and now for the times. It does not sign
// (Sender.Sign does).
func (s Sample) Fresh(now time.Time) (http.Header, []byte) {
	values := map[string]string{}
	fill := func(text string) string {
		return samplePlaceholder.ReplaceAllStringFunc(text, func(p string) string {
			if v, ok := values[p]; ok {
				return v
			}
			m := samplePlaceholder.FindStringSubmatch(p)
			v := sampleKinds[m[1]](now) // known: parseSample checked
			values[p] = v
			return v
		})
	}
	h := make(http.Header, len(s.header))
	for k, vs := range s.header {
		for _, v := range vs {
			h.Add(k, fill(v))
		}
	}
	return h, []byte(fill(string(s.body)))
}

const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// randomText is n random letters and digits.
func randomText(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alnum[randomBelow(len(alnum))]
	}
	return string(b)
}

// randomHex is the hex of n random bytes.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// randomUUID is a random (version 4) UUID.
func randomUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// randomInt10 is a random number of 10 digits.
func randomInt10() string {
	return strconv.Itoa(1_000_000_000 + randomBelow(9_000_000_000))
}

// randomBelow is a uniformly random int in [0, n).
func randomBelow(n int) int {
	v, _ := rand.Int(rand.Reader, big.NewInt(int64(n)))
	return int(v.Int64())
}
