package catchup

import (
	"errors"
	"io"
	"net/http"
	"time"
)

// maxResponseBytes bounds one answer of a provider's API: a page of events
// or deliveries is far smaller (Stripe's 100 events are a few MB at most),
// and the client libraries read an answer whole before decoding it.
const maxResponseBytes = 32 << 20

// apiClient is the HTTP client of the providers' APIs: each call bounded in
// time, each answer in size (an endless or huge answer ends the pass with
// an error instead of the process's memory), and no redirect followed (the
// client libraries send the API token with every request, so a redirect
// would hand it to whatever host the answer names, in clear over http).
func apiClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout:   timeout,
		Transport: boundedTransport{next: http.DefaultTransport, limit: maxResponseBytes},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// boundedTransport cuts every answer's body at limit bytes with an error.
type boundedTransport struct {
	next  http.RoundTripper
	limit int64
}

func (t boundedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = &boundedBody{ReadCloser: resp.Body, left: t.limit}
	return resp, nil
}

// errTooLarge is an API answer past maxResponseBytes.
var errTooLarge = errors.New("the API's answer is larger than whguard reads (32 MiB)")

// boundedBody reads at most left bytes, then fails.
type boundedBody struct {
	io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly the limit from a longer one.
		var one [1]byte
		n, err := b.ReadCloser.Read(one[:])
		if n > 0 {
			return 0, errTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
