package catchup

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
)

// TestTransportReasonQuotesNothing: a failure that is not the API's own
// error is said in whguard's words, never the client's, which may quote
// the response body.
func TestTransportReasonQuotesNothing(t *testing.T) {
	t.Parallel()
	body := `{"data":[{"id":"evt_1","customer_email":"someone@example.com"}]}`
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("Couldn't deserialize JSON (response status: 200, body sample: '%s'): unexpected end of JSON input", body), "answer could not be read"},
		{context.DeadlineExceeded, "did not answer in time"},
		{&url.Error{Op: "Get", URL: "http://127.0.0.1:1/v1/events?x=" + body, Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}, "could not reach Stripe's API (dial)"},
	} {
		got := transportReason("list the events", "Stripe", c.err).Error()
		if !strings.Contains(got, c.want) || strings.Contains(got, "someone@example.com") {
			t.Errorf("%v → %q, want %q and no body", c.err, got, c.want)
		}
	}
}
