package verify

import (
	"crypto/sha256"
	"net/http"
	"strings"
)

// SchemeTwitter verifies X (Twitter) webhooks: the Account Activity API
// and X API v2 webhooks.
const SchemeTwitter = "twitter"

// twitterSpec: "x-twitter-webhooks-signature: sha256=" + base64 of
// HMAC-SHA256(consumer secret, body), the app's consumer secret (API key
// secret) used as raw bytes; no timestamp
// (https://docs.x.com/x-api/webhooks/quickstart, "Signature validation";
// https://developer.x.com/en/docs/x-api/enterprise/account-activity-api/guides/securing-webhooks).
// X sends no delivery id: the id is the body digest.
//
// Invariant: only a JSON object body is accepted. The CRC answer
// (twitterChallenges) is the very signature an event with the crc_token as
// its body would carry; a crc_token never holds '{', so no CRC answer is
// the signature of an acceptable event, whatever token is asked for.
var twitterSpec = bodyHMACSpec{
	header:  "X-Twitter-Webhooks-Signature",
	prefix:  "sha256=",
	newHash: sha256.New,
	base64:  true,
	event: func(in Input) (string, string, error) {
		v, ok := jsonObject(in.Body)
		if !ok {
			return "", "", refusef(ReasonMalformedBody, "%w: X posts JSON objects; this body is not one", ErrBadRequest)
		}
		return "", twitterEventType(v), nil
	},
}

// twitterEventType is the body's top-level "…_events" key
// ("tweet_create_events", "favorite_events", …): the first in key order
// when there are several, "" when there is none.
func twitterEventType(v jsonValue) string {
	for _, m := range v.members { // sorted by key
		if strings.HasSuffix(m.key, "_events") {
			return m.key
		}
	}
	return ""
}

// The crc_token X accepts. X documents neither alphabet nor length: its
// examples are UUIDs (36 bytes, as in X's sample CRC code), and the token
// is carried as a query parameter, so a base64 or base64url run is the
// widest plausible shape. 128 bytes leaves over three times the observed
// length. What matters is what the alphabet leaves out: '{', '"', ':' and
// space, so a token can never be a JSON object.
const (
	twitterCRCAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=+/"
	twitterCRCMaxLen   = 128
)

// twitterChallenges is X's Challenge-Response Check (quickstart "The CRC
// check"; Account Activity "Securing webhooks"): GET ?crc_token=C, at
// registration, then hourly (v2; the enterprise docs say daily) and on
// demand, answered within 3 s with 200 and
// {"response_token":"sha256=" + base64(HMAC-SHA256(consumer secret, C))},
// under the current secret. It carries no credential: the token's shape is
// the only check (proofShape).
var twitterChallenges = []challenge{{
	method:   http.MethodGet,
	param:    "crc_token",
	maxLen:   twitterCRCMaxLen,
	alphabet: twitterCRCAlphabet,
	proof:    proofShape,
	answer:   answerCRC,
	doc:      "GET `?crc_token=C` (`A-Za-z0-9-_=+/`, ≤ 128) → `{\"response_token\":\"sha256=\"+base64 HMAC-SHA256(secret, C)}`",
}}
