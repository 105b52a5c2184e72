package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/whguard/whguard/verify"
)

const triggerUsage = `usage:
  whguard trigger NAME [TYPE] [-count N] [-to URL]
  whguard trigger -list

Sends a realistic sample event of provider NAME's scheme, with fresh ids and
signed as the provider signs it (with the provider's configured secret), and
prints what whguard answered: a way to test the whole path to your backend
without the provider's dashboard. TYPE picks the sample (its name or its event
type; default: the scheme's first); -count sends N fresh events; -to posts
somewhere else than the local ingress (http://127.0.0.1:<port of
WHGUARD_LISTEN> + the provider's path). -list lists the samples of the
configured providers (of every scheme when WHGUARD_PROVIDERS is unset).

Reads the same WHGUARD_* variables as whguard serve. Exits 0 when every answer
was 2xx, 1 otherwise, 2 on a usage or configuration error.
`

// maxTriggerCount bounds -count: a developer's burst, not a load test.
const maxTriggerCount = 1000

// maxAnswerShown is how much of an answer's body is printed.
const maxAnswerShown = 300

// triggerArgs is the parsed command line of `whguard trigger`.
type triggerArgs struct {
	name, typ string
	count     int
	to        *url.URL // nil: the local ingress
	list      bool
}

// parseTriggerArgs reads NAME [TYPE] and the flags, which may come before,
// between or after them.
func parseTriggerArgs(args []string) (triggerArgs, error) {
	a := triggerArgs{}
	fs := flag.NewFlagSet("trigger", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.IntVar(&a.count, "count", 1, "")
	to := fs.String("to", "", "")
	fs.BoolVar(&a.list, "list", false, "")
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return a, err
		}
		if fs.NArg() == 0 {
			break
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	switch {
	case a.list && len(pos) > 0:
		return a, errors.New("-list takes no provider name")
	case a.list:
		return a, nil
	case len(pos) == 0:
		return a, errors.New("no provider name")
	case len(pos) > 2:
		return a, fmt.Errorf("unexpected %q after NAME and TYPE", pos[2])
	case a.count < 1 || a.count > maxTriggerCount:
		return a, fmt.Errorf("-count %d: expected 1 to %d", a.count, maxTriggerCount)
	}
	a.name = strings.ToLower(pos[0])
	if len(pos) == 2 {
		a.typ = pos[1]
	}
	if *to != "" {
		u, err := url.Parse(*to)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return a, fmt.Errorf("-to %q: expected an absolute http(s) URL", *to)
		}
		a.to = u
	}
	return a, nil
}

// trigger runs `whguard trigger …` and returns the exit status.
func trigger(args, environ []string, stdout, stderr io.Writer) int {
	c := triggerCmd{stdout: stdout, stderr: stderr, now: time.Now, client: &http.Client{
		Timeout: 10 * time.Second,
		// An answer is printed as it is: a redirect is whguard's (or a
		// proxy's) answer, not a hop to follow.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	return c.run(args, environ)
}

// triggerCmd is one run of `whguard trigger`, its clock and HTTP client
// injected.
type triggerCmd struct {
	stdout, stderr io.Writer
	now            func() time.Time
	client         *http.Client
}

func (c triggerCmd) run(args, environ []string) int {
	a, err := parseTriggerArgs(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(c.stdout, triggerUsage)
		return 0
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "whguard trigger: %v\n\n%s", err, triggerUsage)
		return 2
	}
	if a.list && !providersSet(environ) {
		c.listSchemes()
		return 0
	}
	cfg, warnings, err := loadConfig(environ)
	if err != nil {
		for _, w := range warnings {
			fmt.Fprintln(c.stderr, "whguard trigger: warning:", w)
		}
		for _, e := range configErrors(err) {
			fmt.Fprintln(c.stderr, "whguard trigger: invalid configuration:", e)
		}
		return 2
	}
	if a.list {
		c.listProviders(cfg)
		return 0
	}
	return c.send(cfg, a)
}

// providersSet tells whether WHGUARD_PROVIDERS names any provider.
func providersSet(environ []string) bool {
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, envPrefix+"PROVIDERS="); ok && strings.Trim(v, " ,") != "" {
			return true
		}
	}
	return false
}

// send sends a.count fresh samples as provider a.name's sender and prints
// each answer.
func (c triggerCmd) send(cfg *config, a triggerArgs) int {
	p := findProvider(cfg, a.name)
	if p == nil {
		fmt.Fprintf(c.stderr, "whguard trigger: no provider %q is configured (WHGUARD_PROVIDERS: %s)\n", a.name, strings.Join(providerNames(cfg), ", "))
		return 2
	}
	sender, err := verify.NewSender(p.verifyCfg)
	if err != nil {
		// verify's errors name what is wrong, never a secret.
		fmt.Fprintf(c.stderr, "whguard trigger: %v\n", err)
		return 2
	}
	sample, ok := pickSample(p.env.Scheme, a.typ)
	if !ok {
		fmt.Fprintf(c.stderr, "whguard trigger: scheme %s has no sample %q; its samples: %s\n", p.env.Scheme, a.typ, sampleNames(p.env.Scheme))
		return 2
	}
	target := a.to
	if target == nil {
		target = localIngress(cfg.Listen, p.env.Path)
	}
	fmt.Fprintf(c.stdout, "%s: %s sample %q → %s\n", p.name, p.env.Scheme, sample.Name, target.Redacted())
	failed := false
	for i := range a.count {
		status, answer, err := c.post(sender, sample, target)
		if err != nil {
			fmt.Fprintf(c.stderr, "whguard trigger: %v (is whguard serve listening there?)\n", err)
			return 1
		}
		prefix := ""
		if a.count > 1 {
			prefix = fmt.Sprintf("%d/%d ", i+1, a.count)
		}
		fmt.Fprintf(c.stdout, "%s%d %s\n", prefix, status, answer)
		failed = failed || status < 200 || status > 299
	}
	if failed {
		return 1
	}
	return 0
}

// post freshens and signs one copy of sample and posts it to target; it
// returns the answer's status and its body, shortened to one line.
func (c triggerCmd) post(sender *verify.Sender, sample verify.Sample, target *url.URL) (int, string, error) {
	now := c.now()
	h, body := sample.Fresh(now)
	r := &verify.Request{Header: h, Body: body, RawQuery: target.RawQuery}
	if err := sender.Sign(r, now); err != nil {
		return 0, "", err
	}
	req, err := http.NewRequest(http.MethodPost, target.String(), bytes.NewReader(r.Body))
	if err != nil {
		return 0, "", fmt.Errorf("build the request: %w", err)
	}
	for k, vs := range r.Header {
		req.Header[k] = vs
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("post to %s: %w", target.Redacted(), err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerShown+1))
	if err != nil {
		return 0, "", fmt.Errorf("read the answer of %s: %w", target.Redacted(), err)
	}
	return resp.StatusCode, oneLine(answer, maxAnswerShown), nil
}

// oneLine is b on one line, at most max bytes of it, "…" marking a cut.
func oneLine(b []byte, max int) string {
	cut := len(b) > max
	if cut {
		b = b[:max]
	}
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(b), "")), " ")
	if cut {
		s += "…"
	}
	return s
}

// pickSample finds the sample of scheme named, or of event type, want;
// "" picks the first.
func pickSample(scheme, want string) (verify.Sample, bool) {
	ss := verify.Samples(scheme)
	for _, s := range ss {
		if want == "" || s.Name == want || s.Type == want {
			return s, true
		}
	}
	return verify.Sample{}, false
}

// sampleNames lists a scheme's samples, "name (type T)" where the event
// type is not the name, the first marked as the default.
func sampleNames(scheme string) string {
	var out []string
	for i, s := range verify.Samples(scheme) {
		n := s.Name
		switch s.Type {
		case s.Name:
		case "":
			n += " (no type)"
		default:
			n += " (type " + s.Type + ")"
		}
		if i == 0 {
			n += " [default]"
		}
		out = append(out, n)
	}
	return strings.Join(out, ", ")
}

// localIngress is the URL of path on whguard's own ingress: the host of
// listen when it names one, else 127.0.0.1.
func localIngress(listen, path string) *url.URL {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		host, port = "", listen
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return &url.URL{Scheme: "http", Host: net.JoinHostPort(host, port), Path: path}
}

// listProviders prints each configured provider's samples.
func (c triggerCmd) listProviders(cfg *config) {
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tSCHEME\tSAMPLES")
	for _, p := range cfg.providers {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", p.name, p.env.Scheme, samplesOrHint(p.env.Scheme))
	}
	_ = tw.Flush()
}

// listSchemes prints every scheme's samples.
func (c triggerCmd) listSchemes() {
	fmt.Fprintln(c.stdout, "No provider configured (WHGUARD_PROVIDERS): the samples of every scheme.")
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEME\tSAMPLES")
	for _, scheme := range verify.KnownSchemes() {
		fmt.Fprintf(tw, "%s\t%s\n", scheme, samplesOrHint(scheme))
	}
	_ = tw.Flush()
}

// samplesOrHint lists a scheme's samples, or says that its sender holds
// its key.
func samplesOrHint(scheme string) string {
	if verify.SenderKeyHint(scheme) != "" {
		return "none: signed with a key only the provider holds (whguard trigger NAME says how to test it)"
	}
	return sampleNames(scheme)
}

// findProvider returns the configured provider named name, nil if none.
func findProvider(cfg *config, name string) *providerConfig {
	for i := range cfg.providers {
		if cfg.providers[i].name == name {
			return &cfg.providers[i]
		}
	}
	return nil
}
