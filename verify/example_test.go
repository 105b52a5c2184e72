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
