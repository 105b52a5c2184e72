package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"
)

// slackMessage is an incoming-webhook message: text (shown in
// notifications) and blocks (shown in the channel).
type slackMessage struct {
	Text   string       `json:"text"`
	Blocks []slackBlock `json:"blocks"`
}

type slackBlock struct {
	Type     string      `json:"type"`
	Text     *slackText  `json:"text,omitempty"`
	Elements []slackText `json:"elements,omitempty"`
}

type slackText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

var slackIcons = map[string]string{
	SeverityCritical: ":red_circle:", SeverityWarning: ":warning:",
	SeverityInfo: ":information_source:", SeverityResolved: ":white_check_mark:",
}

// body renders m in the configured format.
func (n *Notifier) body(m Message) ([]byte, error) {
	if n.cfg.Format == FormatJSON {
		return json.Marshal(m)
	}
	context := "*" + m.Type + "*"
	for _, f := range []struct{ name, v string }{{"provider", m.Provider}, {"backend", m.Backend}, {"event", m.EventID}} {
		if f.v != "" {
			context += " · " + f.name + " `" + slackEscaper.Replace(f.v) + "`"
		}
	}
	context += " · " + m.At.Format(time.RFC3339)
	summary := slackEscaper.Replace(m.Summary)
	return json.Marshal(slackMessage{
		Text: "whguard: " + summary,
		Blocks: []slackBlock{
			{Type: "section", Text: &slackText{Type: "mrkdwn", Text: slackIcons[m.Severity] + " " + summary}},
			{Type: "context", Elements: []slackText{{Type: "mrkdwn", Text: context}}},
		},
	})
}

// slackEscaper escapes the characters Slack reads as controls in message
// text (its "Escaping text" rules): an event id or a name a sender chose
// is shown, never read as a mention (<!channel>) or a link.
var slackEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// send posts m, trying sendTries times with a short pause between tries;
// it gives up early when ctx ends.
func (n *Notifier) send(ctx context.Context, m Message) {
	body, err := n.body(m)
	if err != nil {
		n.cfg.Metrics.failed(m.Type)
		n.log.Error("alert not rendered", zap.String("type", m.Type), zap.Error(err))
		return
	}
	id := "alert_" + uuid.NewString()
	pause := 500 * time.Millisecond
	for try := 1; ; try++ {
		err = n.post(ctx, body, id)
		if err == nil {
			n.cfg.Metrics.sent(m.Type)
			return
		}
		if try == sendTries || ctx.Err() != nil {
			break
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
		}
		pause *= 2
	}
	n.cfg.Metrics.failed(m.Type)
	// The URL is not logged: it may hold a token.
	n.log.Warn("alert not delivered", zap.String("type", m.Type), zap.Int("tries", sendTries), zap.Error(err))
}

// post sends one message once; id is the same on every try (the
// webhook-id of a signed message, so a receiver can drop repeats).
func (n *Notifier) post(ctx context.Context, body []byte, id string) error {
	ctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("build alert request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "whguard-alerts")
	if n.cfg.Format == FormatJSON && n.cfg.Sign != nil {
		req.Header.Set("Webhook-Id", id)
		n.cfg.Sign(req.Header, body, n.cfg.Now())
	}
	resp, err := n.cfg.Client.Do(req)
	if err != nil {
		// Strip the URL from the error: it may hold a token.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return fmt.Errorf("post alert: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("post alert: receiver answered %d", resp.StatusCode)
	}
	return nil
}
