package main

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// bodySize is the size of every generated payload, in bytes.
const bodySize = 1024

// dupEvery makes every dupEvery-th request (positions dupEvery-1,
// 2·dupEvery-1, …) a redelivery of an earlier event: 10 %.
const dupEvery = 10

// dupMinDistance keeps a duplicate at least this many unique events after
// its original when possible, as a sender's redelivery would be, rather
// than racing the original while it is still in flight.
const dupMinDistance = 256

// request is one signed Standard Webhooks delivery, ready to send.
type request struct {
	id     string // webhook-id: the event id
	ts     string // webhook-timestamp
	sig    string // webhook-signature
	body   []byte
	unique int  // index of the event among the unique ones
	dup    bool // a re-signed redelivery of event unique
}

// signer generates and signs the bench's events. Request i is fully
// determined by i (its event, body and whether it is a duplicate); only its
// timestamp, and so its signature, depends on when it is signed.
type signer struct {
	key    []byte
	secret string // "whsec_" + base64(key), as configured in the servers
	tag    string // event id prefix, distinct per run
}

// newSigner returns a signer with a fresh random key.
func newSigner(tag string) *signer {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return &signer{key: key, secret: "whsec_" + base64.StdEncoding.EncodeToString(key), tag: tag}
}

// uniqueOf returns the unique-event index of request i and whether i is a
// duplicate. Requests dupEvery-1, 2·dupEvery-1, … are duplicates of an
// earlier event, chosen by a hash of i.
func uniqueOf(i int) (unique int, dup bool) {
	dupsBefore := (i + 1) / dupEvery // duplicates at positions < i, plus i itself if it is one
	if i%dupEvery != dupEvery-1 {
		return i - dupsBefore, false
	}
	uniquesBefore := i - (dupsBefore - 1)
	span := uniquesBefore
	if span > dupMinDistance {
		span -= dupMinDistance
	}
	return int(splitmix(uint64(i)) % uint64(span)), true
}

// uniquesIn is the number of unique events among the first n requests.
func uniquesIn(n int) int { return n - n/dupEvery }

// splitmix is a fixed 64-bit mixing function (SplitMix64's finaliser).
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// eventID names unique event u of this signer's run.
func (s *signer) eventID(u int) string { return "msg_" + s.tag + "_" + strconv.Itoa(u) }

// parseUnique is the inverse of eventID for the fast backend: the unique
// index, or false for an id this run did not send.
func parseUnique(tag, id string) (int, bool) {
	rest, ok := strings.CutPrefix(id, "msg_"+tag+"_")
	if !ok {
		return 0, false
	}
	u, err := strconv.Atoi(rest)
	return u, err == nil && u >= 0
}

// body returns the ~1 KB JSON payload of unique event u: an order event
// padded with a note to exactly bodySize bytes.
func (s *signer) body(u int) []byte {
	h := splitmix(uint64(u))
	head := fmt.Sprintf(`{"type":"order.created","timestamp":"2026-01-15T10:%02d:%02dZ","data":{"object":"order","id":"ord_%s_%d","customer":"cus_%06d","amount_cents":%d,"currency":"eur","items":[{"sku":"SKU-%04d","quantity":%d,"unit_price_cents":%d},{"sku":"SKU-%04d","quantity":1,"unit_price_cents":%d}],"shipping":{"name":"Ada Lovelace","line1":"12 Analytical Engine Row","city":"London","postal_code":"N1 9GU","country":"GB"},"metadata":{"channel":"web","campaign":"spring","bench":true},"note":"`,
		u/60%60, u%60, s.tag, u, h%1000000, 1000+h%9000, h%10000, 1+h%5, 500+h%20000, (h>>20)%10000, 100+h%5000)
	const tail = `"}}`
	pad := bodySize - len(head) - len(tail)
	var b strings.Builder
	b.Grow(bodySize)
	b.WriteString(head)
	for i := 0; i < pad; i++ {
		b.WriteByte('a' + byte((h>>(i%56))+uint64(i))%26)
	}
	b.WriteString(tail)
	return []byte(b.String())
}

// sign returns request i signed at unix time ts. body, when not nil, is
// the payload of the request's event (shared between an event and its
// duplicates); else it is generated.
func (s *signer) sign(i int, ts int64, body []byte) request {
	u, dup := uniqueOf(i)
	if body == nil {
		body = s.body(u)
	}
	if dup {
		ts++ // a redelivery is re-signed with a fresh timestamp
	}
	r := request{id: s.eventID(u), ts: strconv.FormatInt(ts, 10), body: body, unique: u, dup: dup}
	mac := hmac.New(sha256.New, s.key)
	mac.Write([]byte(r.id + "." + r.ts + "."))
	mac.Write(body)
	r.sig = "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	return r
}

// source hands out the requests of one run by index.
type source interface {
	// Len is the number of requests available.
	Len() int
	// Uniques is the number of unique events among them.
	Uniques() int
	// At returns request i (0 ≤ i < Len()).
	At(i int) request
}

// presigned is a source whose requests were all generated and signed
// before the clock started.
type presigned struct {
	reqs    []request
	uniques int
}

// presign generates and signs n requests at now, in parallel.
func presign(s *signer, n int, now time.Time) *presigned {
	p := &presigned{reqs: make([]request, n), uniques: uniquesIn(n)}
	bodies := make([][]byte, p.uniques)
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for u := w; u < len(bodies); u += workers {
				bodies[u] = s.body(u)
			}
		})
	}
	wg.Wait()
	ts := now.Unix()
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				u, _ := uniqueOf(i)
				p.reqs[i] = s.sign(i, ts, bodies[u])
			}
		})
	}
	wg.Wait()
	return p
}

func (p *presigned) Len() int         { return len(p.reqs) }
func (p *presigned) Uniques() int     { return p.uniques }
func (p *presigned) At(i int) request { return p.reqs[i] }

// lazy is a source that signs each request when it is sent, for runs too
// long for timestamps signed in advance to stay within the 5 min
// tolerance (the -long runs). Its signing cost is the load generator's.
type lazy struct {
	s *signer
	n int
}

func (l lazy) Len() int         { return l.n }
func (l lazy) Uniques() int     { return uniquesIn(l.n) }
func (l lazy) At(i int) request { return l.s.sign(i, time.Now().Unix(), nil) }
