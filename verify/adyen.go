package verify

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"time"
)

// SchemeAdyen verifies Adyen's standard (payments) webhooks: each
// NotificationRequestItem carries additionalData.hmacSignature, the
// base64 HMAC-SHA256, keyed with the hex-decoded HMAC key, of
//
//	pspReference:originalReference:merchantAccountCode:merchantReference:value:currency:eventCode:success
//
// with an absent field written as "" and value the amount in minor units
// (https://docs.adyen.com/development-resources/webhooks/secure-webhooks/verify-hmac-signatures;
// Adyen/adyen-java-api-library HMACValidator.getDataToSign,
// Adyen/adyen-go-api-library src/hmacvalidator). The Balance Platform's and
// Management API's webhooks sign the raw body in an HmacSignature header
// instead: this scheme does not take them.
const SchemeAdyen = "adyen"

const (
	// adyenKeyLen is the HMAC key's length in bytes (64 hex characters).
	adyenKeyLen = 32
	// adyenMaxItems bounds the items of one notification whose signature
	// is checked. JSON webhooks carry one item ("JSON and HTTP POST
	// webhooks contain only one NotificationRequestItem",
	// https://docs.adyen.com/development-resources/webhooks/webhook-types);
	// older integrations batched a few.
	adyenMaxItems = 100
)

// adyenReply is the acknowledgement Adyen expects: 200 with "[accepted]"
// (the Notification API's NotificationResponse: "Set this parameter to
// [accepted] to acknowledge that you received a notification"); anything
// else sends the webhook to the retry queue. Duplicates get it too.
var adyenReply = []byte("[accepted]")

// adyenReplyType is adyenReply's Content-Type.
const adyenReplyType = "text/plain; charset=utf-8"

// adyenScheme verifies every item's signature with every configured key.
type adyenScheme struct {
	keys [][]byte // each adyenKeyLen bytes
}

var _ Scheme = (*adyenScheme)(nil)

// newAdyenScheme decodes each secret as an HMAC key (decodeAdyenKey): the
// current one first, the previous one kept while Adyen's retry queue
// drains messages signed with it.
func newAdyenScheme(cfg ProviderConfig) (Scheme, error) {
	keys, err := secretKeys(cfg.Secrets, decodeAdyenKey)
	if err != nil {
		return nil, err
	}
	return &adyenScheme{keys: keys}, nil
}

// errAdyenKey says what an HMAC key looks like; it quotes nothing.
var errAdyenKey = errors.New("an Adyen HMAC key is 64 hexadecimal characters (32 bytes), as the Customer Area shows it")

// decodeAdyenKey hex-decodes an HMAC key (either case) of exactly 32 bytes.
func decodeAdyenKey(s string) ([]byte, error) {
	if len(s) != 2*adyenKeyLen {
		return nil, errAdyenKey
	}
	key, err := hex.DecodeString(s)
	if err != nil {
		return nil, errAdyenKey
	}
	return key, nil
}

// Verify checks every item's signature (all must verify, each with any
// configured key: during a rotation, retries signed with the previous key
// still pass). The id is pspReference + ":" + eventCode for a single item,
// both signed; a batch of several is keyed by its digest, as the items'
// own ids would each key a different event. The type is the first item's
// eventCode. Every verified request is answered 200 "[accepted]".
func (s *adyenScheme) Verify(in Input, _ time.Time) (Verified, error) {
	v, err := parseJSON(in.Body)
	if err != nil {
		return Verified{}, refusef(ReasonMalformedBody, "%w: body is not the JSON of an Adyen notification", ErrBadRequest)
	}
	items, ok := v.field("notificationItems")
	if !ok || items.kind != kindArray || len(items.elems) == 0 {
		return Verified{}, refusef(ReasonMalformedBody, "%w: body has no notificationItems", ErrBadRequest)
	}
	if len(items.elems) > adyenMaxItems {
		return Verified{}, refusef(ReasonMalformedBody, "%w: more than %d notification items in one request", ErrBadRequest, adyenMaxItems)
	}
	var first jsonValue
	for i, wrapper := range items.elems {
		item, ok := wrapper.field("NotificationRequestItem")
		if !ok || item.kind != kindObject {
			return Verified{}, refusef(ReasonMalformedBody, "%w: notification item %d has no NotificationRequestItem object", ErrBadRequest, i+1)
		}
		if err := s.verifyItem(item, i); err != nil {
			return Verified{}, err
		}
		if i == 0 {
			first = item
		}
	}
	out := Verified{Reply: adyenReply, AnswerType: adyenReplyType}
	out.Type, _ = first.stringField("eventCode")
	if len(items.elems) == 1 {
		psp, _ := first.stringField("pspReference")
		if psp != "" && out.Type != "" {
			out.ID = psp + ":" + out.Type
		}
	}
	return out, nil
}

// verifyItem checks one NotificationRequestItem's hmacSignature; i counts
// items from 0 for the messages.
func (s *adyenScheme) verifyItem(item jsonValue, i int) error {
	data, err := adyenSignedData(item)
	if err != nil {
		return refusef(ReasonMalformedBody, "%w: notification item %d: %w", ErrBadRequest, i+1, err)
	}
	add, _ := item.field("additionalData")
	sig, ok := add.stringField("hmacSignature")
	if !ok || sig == "" {
		return refusef(ReasonSignatureMismatch, "%w: notification item %d carries no additionalData.hmacSignature (enable HMAC on the webhook)", ErrUnauthorized, i+1)
	}
	var buf [33]byte // 44 characters without padding would decode to 33 bytes
	n, err := base64.StdEncoding.Strict().Decode(buf[:], []byte(sig))
	if len(sig) != base64.StdEncoding.EncodedLen(len(signature{})) || err != nil || n != len(signature{}) {
		return refusef(ReasonSignatureMismatch, "%w: notification item %d: hmacSignature is not a base64 HMAC-SHA256", ErrUnauthorized, i+1)
	}
	if !anyKeyMatches(s.keys, []signature{signature(buf[:32])}, nil, []byte(data)) {
		return refusef(ReasonSignatureMismatch, "%w: notification item %d: no configured HMAC key verifies its hmacSignature", ErrUnauthorized, i+1)
	}
	return nil
}

// adyenSignedData builds the string an item's signature covers. Each field
// is the JSON string's text, "" when absent; value is the number's text,
// which must be an integer (minor units): the canonical text of a JSON
// integer is its literal, so "1000" is signed as 1000. success is a
// string "true"/"false" in Adyen's JSON; a boolean is written the same
// way.
func adyenSignedData(item jsonValue) (string, error) {
	text := func(v jsonValue, key string) (string, error) {
		f, ok := v.field(key)
		switch {
		case !ok || f.kind == kindNull:
			return "", nil
		case f.kind == kindString:
			return f.text, nil
		case key == "success" && f.kind == kindTrue:
			return "true", nil
		case key == "success" && f.kind == kindFalse:
			return "false", nil
		}
		return "", errors.New(key + " is not a string")
	}
	var parts [8]string
	var err error
	for i, key := range [...]string{"pspReference", "originalReference", "merchantAccountCode", "merchantReference"} {
		if parts[i], err = text(item, key); err != nil {
			return "", err
		}
	}
	if amount, ok := item.field("amount"); ok && amount.kind != kindNull {
		if amount.kind != kindObject {
			return "", errors.New("amount is not an object")
		}
		if value, ok := amount.field("value"); ok && value.kind != kindNull {
			if value.kind != kindNumber || !isInteger(value.text) {
				return "", errors.New("amount.value is not an integer of minor units")
			}
			parts[4] = value.text
		}
		if parts[5], err = text(amount, "currency"); err != nil {
			return "", err
		}
	}
	if parts[6], err = text(item, "eventCode"); err != nil {
		return "", err
	}
	if parts[7], err = text(item, "success"); err != nil {
		return "", err
	}
	return strings.Join(parts[:], ":"), nil
}
