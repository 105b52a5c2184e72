package main

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/whguard/whguard/examples/backends/orders"
)

// demoDeadline bounds the scripted part of the demo.
const demoDeadline = 25 * time.Second

// demo runs `whguard demo [--keep]`: the naive orders backend, whguard on
// the embedded journal and a scripted sender, in one process on free
// loopback ports; it prints what happened and exits 0 only when every
// behaviour was as expected.
func demo(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keep := fs.Bool("keep", false, "leave everything running for you to explore until Ctrl-C")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	d, err := newDemo(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "whguard demo:", err)
		return 1
	}
	defer d.close()
	ok := d.run(ctx, stdout, *keep)
	if *keep {
		fmt.Fprintf(stdout, "\nStill running (--keep). Send your own events to http://%s/webhooks/shop (scheme standard, secret %s);\npress Ctrl-C to stop and remove %s.\n", d.ingress, d.secret, d.dir)
		<-ctx.Done()
	}
	if !ok {
		return 1
	}
	return 0
}

type demoRun struct {
	dir      string
	secret   string
	token    string
	backend  *orders.Service
	backSrv  *http.Server
	backAddr string
	ingress  string
	admin    string
	logPath  string
	cancel   context.CancelFunc
	done     chan error
	client   *http.Client
	// stripe stands in for Stripe's API in the catch-up scene.
	stripe *demoStripeAPI
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func newDemo(parent context.Context) (*demoRun, error) {
	dir, err := os.MkdirTemp("", "whguard-demo-")
	if err != nil {
		return nil, err
	}
	key := make([]byte, 24)
	_, _ = rand.Read(key)
	d := &demoRun{
		dir:     dir,
		secret:  "whsec_" + base64.StdEncoding.EncodeToString(key),
		token:   randomHex(16),
		logPath: filepath.Join(dir, "whguard.log"),
		client:  &http.Client{Timeout: 5 * time.Second},
		// The naive backend: it applies every request it gets, fails the
		// first order.created once, and refuses order.disputed for good.
		backend: orders.New(orders.Config{FlakyType: "order.created", RejectType: "order.disputed"}),
		done:    make(chan error, 1),
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d.backAddr = ln.Addr().String()
	d.backSrv = &http.Server{Handler: d.backend.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = d.backSrv.Serve(ln) }()
	if d.stripe, err = startDemoStripeAPI(); err != nil {
		return nil, err
	}

	// whguard is configured exactly as an operator would, through env.
	cfg, _, err := loadConfig(d.environ())
	if err != nil {
		return nil, fmt.Errorf("demo configuration: %w", err)
	}
	logFile, err := os.Create(d.logPath)
	if err != nil {
		return nil, err
	}
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(logFile), zap.InfoLevel)).Named("whguard")
	ctx, cancel := context.WithCancel(parent)
	d.cancel = cancel
	addrs := make(chan [2]string, 1)
	go func() {
		d.done <- serveWith(ctx, cfg, log, func(ingress, admin string) { addrs <- [2]string{ingress, admin} })
		logFile.Close()
	}()
	select {
	case a := <-addrs:
		d.ingress, d.admin = a[0], a[1]
	case err := <-d.done:
		return nil, fmt.Errorf("whguard did not start: %v (log: %s)", err, d.logPath)
	case <-time.After(10 * time.Second):
		return nil, errors.New("whguard did not start within 10 s")
	}
	// Ready means migrated.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := d.client.Get("http://" + d.admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return d, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("whguard not ready within 10 s (log: %s)", d.logPath)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *demoRun) environ() []string {
	return []string{
		"WHGUARD_DATABASE_URL=sqlite:" + filepath.Join(d.dir, "whguard.db"),
		"WHGUARD_LISTEN=127.0.0.1:0",
		"WHGUARD_ADMIN_LISTEN=127.0.0.1:0",
		"WHGUARD_ADMIN_TOKEN=" + d.token,
		"WHGUARD_PROVIDERS=shop,stripe",
		"WHGUARD_SHOP_SCHEME=standard",
		"WHGUARD_SHOP_SECRET=" + d.secret,
		// Stripe with catch-up, against the demo's stand-in for its API;
		// the passes here are the ones the demo runs.
		"WHGUARD_STRIPE_SCHEME=stripe",
		"WHGUARD_STRIPE_SECRET=whsec_" + strings.TrimPrefix(d.secret, "whsec_"),
		"WHGUARD_STRIPE_CATCHUP=on",
		"WHGUARD_STRIPE_CATCHUP_TOKEN=" + demoStripeKey,
		"WHGUARD_STRIPE_CATCHUP_API_URL=http://" + d.stripe.addr,
		"WHGUARD_STRIPE_CATCHUP_INTERVAL=1h",
		"WHGUARD_BACKEND_URL=http://" + d.backAddr,
		// Short retries so the demo shows one within a second.
		"WHGUARD_RETRY_BASE_DELAY=200ms",
		"WHGUARD_RETRY_MAX_DELAY=1s",
		"WHGUARD_SHUTDOWN_TIMEOUT=5s",
	}
}

func (d *demoRun) close() {
	d.cancel()
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = d.backSrv.Shutdown(ctx)
	if d.stripe != nil {
		_ = d.stripe.srv.Shutdown(ctx)
	}
	_ = os.RemoveAll(d.dir)
}

// sign signs like a Standard Webhooks sender.
func (d *demoRun) sign(secret, id string, body []byte) http.Header {
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%s.%s", id, ts, body)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", ts)
	h.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	return h
}

type answer struct {
	status int
	body   string
	// err is why there was no answer (status 0).
	err string
}

func (d *demoRun) post(h http.Header, body []byte) answer {
	req, _ := http.NewRequest(http.MethodPost, "http://"+d.ingress+"/webhooks/shop", strings.NewReader(string(body)))
	req.Header = h
	resp, err := d.client.Do(req)
	if err != nil {
		return answer{err: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, body: string(b)}
}

func orderBody(typ, order string) []byte {
	return []byte(fmt.Sprintf(`{"type":%q,"data":{"order_id":%q,"amount":4200,"currency":"eur"}}`, typ, order))
}

// step is one line of the report: what was sent, what came back, and
// whether that is what whguard promises.
type step struct {
	what, got string
	ok        bool
}

func countStatuses(as []answer) string {
	counts := map[int]int{}
	for _, a := range as {
		counts[a.status]++
	}
	var parts []string
	for _, s := range []int{202, 200, 401, 409, 503, 0} {
		if counts[s] > 0 {
			label := strconv.Itoa(s)
			if s == 0 {
				label = "no answer"
			}
			parts = append(parts, fmt.Sprintf("%d × %s", counts[s], label))
		}
	}
	return strings.Join(parts, ", ")
}

func (d *demoRun) run(ctx context.Context, w io.Writer, keep bool) bool {
	start := time.Now()
	var steps []step
	// noAnswer is the first reason a request got no answer, for the report.
	var noAnswer string
	check := func(what string, as []answer, ok bool) {
		steps = append(steps, step{what, countStatuses(as), ok})
		for _, a := range as {
			if a.status == 0 && noAnswer == "" {
				noAnswer = a.err
			}
		}
	}
	allStatus := func(as []answer, status int) bool {
		for _, a := range as {
			if a.status != status {
				return false
			}
		}
		return len(as) > 0
	}

	// 1. Five new orders.
	var firsts []answer
	bodies := map[string][]byte{}
	for i := 1; i <= 5; i++ {
		o := fmt.Sprintf("o-%d", i)
		bodies[o] = orderBody("order.paid", o)
		firsts = append(firsts, d.post(d.sign(d.secret, "msg_"+o, bodies[o]), bodies[o]))
	}
	check("5 new order.paid events (o-1 … o-5)", firsts, allStatus(firsts, 202))

	// 2. Sequential resends: same event, same bytes, re-signed each time.
	var seq []answer
	for range 3 {
		seq = append(seq, d.post(d.sign(d.secret, "msg_o-1", bodies["o-1"]), bodies["o-1"]))
	}
	same := true
	for _, a := range seq {
		same = same && a.body == firsts[0].body
	}
	check("3 sequential resends of o-1", seq, allStatus(seq, 200) && same)

	// 3. A storm: 20 concurrent copies of a new event.
	bodies["o-6"] = orderBody("order.paid", "o-6")
	storm := make([]answer, 20)
	var wg sync.WaitGroup
	for i := range storm {
		wg.Add(1)
		go func() {
			defer wg.Done()
			storm[i] = d.post(d.sign(d.secret, "msg_o-6", bodies["o-6"]), bodies["o-6"])
		}()
	}
	wg.Wait()
	n202 := 0
	for _, a := range storm {
		if a.status == 202 {
			n202++
		}
	}
	check("20 concurrent copies of a new event (o-6)", storm, n202 == 1 && func() bool {
		for _, a := range storm {
			if a.status != 200 && a.status != 202 {
				return false
			}
		}
		return true
	}())

	// 4. A re-serialized resend: keys reordered, whitespace added.
	reser := []byte("{\n  \"data\": {\"currency\": \"eur\", \"amount\": 4200, \"order_id\": \"o-2\"},\n  \"type\": \"order.paid\"\n}")
	r := d.post(d.sign(d.secret, "msg_o-2", reser), reser)
	check("o-2 re-serialized (keys reordered, spaces) and re-signed", []answer{r}, r.status == 200)

	// 5. A forgery: signed with the wrong secret.
	bodies["o-7"] = orderBody("order.paid", "o-7")
	wrongKey := make([]byte, 24)
	_, _ = rand.Read(wrongKey)
	f := d.post(d.sign("whsec_"+base64.StdEncoding.EncodeToString(wrongKey), "msg_o-7", bodies["o-7"]), bodies["o-7"])
	check("a forged event for o-7 (wrong secret)", []answer{f}, f.status == 401)

	// 6. One the backend fails at first, 7. one it refuses for good.
	bodies["o-8"] = orderBody("order.created", "o-8")
	fl := d.post(d.sign(d.secret, "msg_o-8", bodies["o-8"]), bodies["o-8"])
	check("o-8, which the backend fails once (503)", []answer{fl}, fl.status == 202)
	bodies["o-9"] = orderBody("order.disputed", "o-9")
	rj := d.post(d.sign(d.secret, "msg_o-9", bodies["o-9"]), bodies["o-9"])
	check("o-9, which the backend refuses (422)", []answer{rj}, rj.status == 202)

	// 8. whguard was down for a minute: Stripe could not deliver three
	// events (its attempts got no answer), and catch-up brings them back
	// from Stripe's API.
	for i := 10; i <= 12; i++ {
		d.stripe.miss(fmt.Sprintf("evt_demo_o-%d", i), "order.paid", fmt.Sprintf("o-%d", i))
	}
	caught, cerr := d.catchupRun("stripe")
	steps = append(steps, step{"o-10 … o-12 missed while whguard was down (Stripe)", fmt.Sprintf("catch-up: %d back", caught), cerr == nil && caught == 3})
	if cerr != nil {
		fmt.Fprintln(w, cerr)
	}

	// Wait for the forwarder to settle: 10 events done, 1 dead.
	settled := d.waitSettled(ctx, 10, 1, time.Until(start.Add(demoDeadline)))

	fmt.Fprintln(w, "whguard demo: a naive, non-idempotent orders backend behind whguard (embedded journal,")
	fmt.Fprintln(w, "Standard Webhooks signatures), fed by a scripted sender that behaves like real ones.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "What the sender did                                       whguard answered")
	allOK := settled
	for _, s := range steps {
		mark := "ok"
		if !s.ok {
			mark = "UNEXPECTED"
			allOK = false
		}
		fmt.Fprintf(w, "  %-56s %-22s %s\n", s.what, s.got, mark)
	}
	if noAnswer != "" {
		fmt.Fprintf(w, "  (no answer: %s)\n", noAnswer)
	}

	fmt.Fprintln(w, "\nWhat the backend applied (stateChanges: how many times it really changed each order;")
	fmt.Fprintln(w, "the backend is naive and would apply every copy it received)")
	applied := map[string]orders.Order{}
	for _, o := range d.backend.Orders() {
		applied[o.ID] = o
	}
	for i := 1; i <= 12; i++ {
		id := fmt.Sprintf("o-%d", i)
		o, got := applied[id]
		want, note := 1, ""
		switch id {
		case "o-7":
			want, note = 0, "forged: never journaled, never forwarded"
		case "o-9":
			want, note = 0, "refused by the backend: in quarantine"
		case "o-8":
			note = "applied after a retry"
		case "o-1":
			note = "sent 4 times"
		case "o-6":
			note = "sent 20 times at once"
		case "o-2":
			note = "sent twice, once re-serialized"
		case "o-10", "o-11", "o-12":
			note = "missed while whguard was down: caught up"
		}
		mark := "ok"
		if o.StateChanges != want || (want == 0 && got && o.StateChanges != 0) {
			mark, allOK = "UNEXPECTED", false
		}
		fmt.Fprintf(w, "  %-5s stateChanges=%d  %-44s %s\n", id, o.StateChanges, note, mark)
	}

	dead := d.listEvents("dead")
	fmt.Fprintf(w, "\nQuarantine (status dead, kept for inspection and replay): %d event(s)\n", len(dead))
	for _, e := range dead {
		fmt.Fprintf(w, "  #%v %v %v: %v\n", e["id"], e["event_id"], e["event_type"], e["last_error"])
	}
	if len(dead) != 1 {
		allOK = false
	}
	if flaky := d.attemptsOf("msg_o-8"); flaky < 2 {
		allOK = false
		fmt.Fprintf(w, "  (o-8 was delivered in %d attempt(s); expected a retry)\n", flaky)
	} else {
		fmt.Fprintf(w, "  (o-8 needed %d attempts: the first got 503, the retry succeeded)\n", flaky)
	}

	if keep {
		fmt.Fprintf(w, "\nInspect it yourself (admin token %s):\n", d.token)
		fmt.Fprintf(w, "  web inspector  http://%s/inspect\n", d.admin)
		fmt.Fprintf(w, "  API            curl -H 'Authorization: Bearer %s' http://%s/api/events\n", d.token, d.admin)
		fmt.Fprintf(w, "  CLI            WHGUARD_ADMIN_URL=http://%s WHGUARD_ADMIN_TOKEN=%s go run ./cmd/whguard events list\n", d.admin, d.token)
		fmt.Fprintf(w, "  metrics        http://%s/metrics\n", d.admin)
		fmt.Fprintf(w, "  backend orders http://%s/orders\n", d.backAddr)
		fmt.Fprintf(w, "  whguard's log  %s\n", d.logPath)
	} else {
		fmt.Fprintln(w, "\nTo explore the web inspector, the API, the CLI and the metrics afterwards: whguard demo --keep")
	}
	if allOK {
		fmt.Fprintf(w, "\nResult: every behaviour as expected (%.1fs).\n", time.Since(start).Seconds())
	} else {
		fmt.Fprintf(w, "\nResult: something did not behave as expected (see UNEXPECTED above and the log).\n")
	}
	return allOK
}
