package verify_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/whguard/whguard/verify"
)

func ExampleCanonicalize() {
	for _, in := range []string{
		`{ "b": [1.0, 1e2, -0], "a": "caf\u00e9" }`,
		`{"id": 9007199254740993}`,
		`{"a": 1, "\u0061": 2}`,
		`hello`,
	} {
		out, err := verify.Canonicalize([]byte(in))
		fmt.Printf("%s %v\n", out, err)
	}
	// Output:
	// {"a":"café","b":[1,100,0]} <nil>
	// {"id":9007199254740993} <nil>
	//  duplicate object key
	//  not JSON: unexpected byte at offset 0, expected a value
}

func ExampleProvider_Check() {
	// The example of GitHub's "Validating webhook deliveries" page.
	p, err := verify.NewProvider(verify.ProviderConfig{
		Name:    "github",
		Scheme:  "github",
		Secrets: []string{"It's a Secret to Everybody"},
	})
	if err != nil {
		panic(err)
	}
	h := http.Header{}
	h.Set("X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")
	h.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	h.Set("X-GitHub-Event", "ping")

	ev, err := p.Check(verify.Input{Header: h, Body: []byte("Hello, World!")}, time.Now())
	fmt.Println(ev.ID, ev.Type, err)

	_, err = p.Check(verify.Input{Header: h, Body: []byte("Hello, World?")}, time.Now())
	fmt.Println(err)
	// Output:
	// 72d3162e-cc78-11e3-81ab-4c9367dc0958 ping <nil>
	// unauthorized: no signature matches
}

func ExampleDigest() {
	form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	a, _ := verify.Digest(form, []byte("b=2&a=1"))
	b, _ := verify.Digest(form, []byte("a=1&b=2"))
	fmt.Println(a == b)

	c, _ := verify.Digest(nil, []byte(`{"x": 1.0, "y": [true]}`))
	d, _ := verify.Digest(nil, []byte(`{"y":[true],"x":1}`))
	fmt.Println(c == d, c)
	// Output:
	// true
	// true sha256:d729e37e945a4d101a4f12653a82721575ee6f2543b6d18236971ddb86f518ad
}

func ExampleProvider_Resign() {
	// A Slack request delivered late: Slack's libraries refuse a timestamp
	// older than 5 minutes, so the backend gets a fresh signature.
	p, err := verify.NewProvider(verify.ProviderConfig{Name: "slack", Scheme: "slack", Secrets: []string{"8f742231b10e8888abcd99yyyzzz85a5"}})
	if err != nil {
		panic(err)
	}
	h := http.Header{}
	h.Set("X-Slack-Request-Timestamp", "1531420618")
	h.Set("X-Slack-Signature", "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503")
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	// The example of Slack's "Verifying requests from Slack" page.
	body := []byte("token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c")
	_, err = p.Check(verify.Input{Header: h, Body: body}, time.Unix(1531420618, 0))
	fmt.Println(err)
	fmt.Println(p.CanResign())
	p.Resign(h, body, time.Unix(1531421218, 0)) // 10 minutes later
	fmt.Println(h.Get("X-Slack-Request-Timestamp"))
	fmt.Println(h.Get("X-Slack-Signature"))
	fmt.Println(h.Get("Content-Type"))
	_, err = p.Check(verify.Input{Header: h, Body: body}, time.Unix(1531421218, 0))
	fmt.Println(err)
	// Output:
	// <nil>
	// true
	// 1531421218
	// v0=faed2f33b4bd62cd8596150283ed60b987d960aeba084bab73a9513fc4c44a31
	// application/x-www-form-urlencoded
	// <nil>
}
