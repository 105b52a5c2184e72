package verify

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"
)

// The senders that sign inside the body: the body is rewritten with the
// signature (or credential) in its place. A JSON body is decoded and
// encoded again (numbers kept as written, members in key order, no HTML
// escaping), so it is sent as compact JSON.

// send writes Mailgun's signature block, a fresh token and the time at
// signed with the signing key: the "signature" object of a JSON webhook, or
// the timestamp, token and signature fields of a legacy form post.
func (s *mailgunScheme) send(r *Request, _ string, at time.Time) error {
	ts, token := unixText(at), randomHex(25) // Mailgun's tokens are 50 characters
	sig := hex.EncodeToString(macSHA256(s.keys[0], ts, []byte(token)))
	if isForm(r.Header) {
		values, err := url.ParseQuery(string(r.Body))
		if err != nil {
			return errors.New("mailgun form body unparseable")
		}
		values.Set("timestamp", ts)
		values.Set("token", token)
		values.Set(mailgunSignatureField, sig)
		r.Body = []byte(values.Encode())
		return nil
	}
	body, err := rewriteJSON(r.Body, func(obj map[string]any) error {
		obj[mailgunSignatureField] = map[string]any{"timestamp": ts, "token": token, mailgunSignatureField: sig}
		return nil
	})
	if err != nil {
		return fmt.Errorf("mailgun body: %w", err)
	}
	r.Body = body
	return nil
}

// send writes the subscription's clientState into every notification of
// the collection's "value".
func (s *msGraphScheme) send(r *Request, cred string, _ time.Time) error {
	body, err := rewriteJSON(r.Body, func(obj map[string]any) error {
		items, _ := obj["value"].([]any)
		if len(items) == 0 {
			return errors.New("no \"value\" array of notifications")
		}
		for _, it := range items {
			item, ok := it.(map[string]any)
			if !ok {
				return errors.New("a notification is not an object")
			}
			item["clientState"] = cred
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("msgraph body: %w", err)
	}
	r.Body = body
	return nil
}

// send writes every NotificationRequestItem's additionalData.hmacSignature,
// made with the HMAC key over the item's signed fields.
func (s *adyenScheme) send(r *Request, _ string, _ time.Time) error {
	body, err := rewriteJSON(r.Body, func(obj map[string]any) error {
		items, _ := obj["notificationItems"].([]any)
		if len(items) == 0 {
			return errors.New("no notificationItems")
		}
		for i, it := range items {
			wrapper, _ := it.(map[string]any)
			item, ok := wrapper["NotificationRequestItem"].(map[string]any)
			if !ok {
				return fmt.Errorf("notification item %d has no NotificationRequestItem object", i+1)
			}
			raw, err := json.Marshal(item)
			if err != nil {
				return err
			}
			v, err := parseJSON(raw)
			if err != nil {
				return err
			}
			data, err := adyenSignedData(v)
			if err != nil {
				return fmt.Errorf("notification item %d: %w", i+1, err)
			}
			add, _ := item["additionalData"].(map[string]any)
			if add == nil {
				add = map[string]any{}
				item["additionalData"] = add
			}
			add["hmacSignature"] = base64.StdEncoding.EncodeToString(macSHA256(s.keys[0], "", []byte(data)))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("adyen body: %w", err)
	}
	r.Body = body
	return nil
}

// rewriteJSON decodes body, a JSON object, lets edit change it, and
// encodes it again (see above).
func rewriteJSON(body []byte, edit func(map[string]any) error) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, errors.New("not a JSON object")
	}
	if err := edit(obj); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}
