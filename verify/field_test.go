package verify

import (
	"errors"
	"fmt"
	"testing"
)

// Each configuration problem comes back as a FieldError naming the setting
// that holds the bad value, and every problem is reported, not the first.
func TestNewProviderFieldErrors(t *testing.T) {
	cases := []struct {
		name string
		cfg  ProviderConfig
		want []Field
	}{
		{"unknown scheme", ProviderConfig{Scheme: "gitbub", Secrets: []string{"s"}}, []Field{FieldScheme}},
		{"empty scheme", ProviderConfig{Secrets: []string{"s"}}, []Field{FieldScheme}},
		{"no secret", ProviderConfig{Scheme: SchemeStripe}, []Field{FieldSecrets}},
		{"bad standard secret", ProviderConfig{Scheme: SchemeStandard, Secrets: []string{"whsec_!!"}}, []Field{FieldSecrets}},
		{"negative tolerance", ProviderConfig{Scheme: SchemeStripe, Secrets: []string{"s"}, Tolerance: -1}, []Field{FieldTolerance}},
		{"bad id header", ProviderConfig{Scheme: SchemeGitHub, Secrets: []string{"s"}, IDHeader: "a b"}, []Field{FieldIDHeader}},
		{"no public key", ProviderConfig{Scheme: SchemeDiscord}, []Field{FieldPublicKey}},
		{"bad public key", ProviderConfig{Scheme: SchemeSendGrid, PublicKey: "!!"}, []Field{FieldPublicKey}},
		{"no public url", ProviderConfig{Scheme: SchemeTwilio, Secrets: []string{"s"}}, []Field{FieldPublicURL}},
		{"bad public url and no secret", ProviderConfig{Scheme: SchemeSquare, PublicURL: "https://a/x?q"}, []Field{FieldSecrets, FieldPublicURL}},
		{"hmac algorithm", ProviderConfig{Scheme: SchemeHMAC, Secrets: []string{"s"}, HMAC: HMACConfig{SignatureHeader: "X-Sig", Algorithm: "md5"}}, []Field{FieldHMACAlgorithm}},
		{"hmac no signature header", ProviderConfig{Scheme: SchemeHMAC, Secrets: []string{"s"}}, []Field{FieldSignatureHeader}},
		{"hmac bad signature header", ProviderConfig{Scheme: SchemeHMAC, Secrets: []string{"s"}, HMAC: HMACConfig{SignatureHeader: "bad header"}}, []Field{FieldSignatureHeader}},
		{"hmac encoding", ProviderConfig{Scheme: SchemeHMAC, Secrets: []string{"s"}, HMAC: HMACConfig{SignatureHeader: "X-Sig", Encoding: "base32"}}, []Field{FieldSignatureEncoding}},
		{"hmac bad timestamp header", ProviderConfig{Scheme: SchemeHMAC, Secrets: []string{"s"}, HMAC: HMACConfig{SignatureHeader: "X-Sig", TimestampHeader: "a b", SignedContent: "{timestamp}.{body}"}}, []Field{FieldTimestampHeader}},
		{"hmac template", ProviderConfig{Scheme: SchemeHMAC, Secrets: []string{"s"}, HMAC: HMACConfig{SignatureHeader: "X-Sig", SignedContent: "{nope}"}}, []Field{FieldSignedContent}},
		{"hmac template without body", ProviderConfig{Scheme: SchemeHMAC, Secrets: []string{"s"}, HMAC: HMACConfig{SignatureHeader: "X-Sig", SignedContent: "{id}"}, IDHeader: "X-Id"}, []Field{FieldSignedContent}},
		{"hmac everything", ProviderConfig{Scheme: SchemeHMAC, IDHeader: "a b", Tolerance: -1, HMAC: HMACConfig{Algorithm: "md5", SignatureHeader: "a b", Encoding: "z"}},
			[]Field{FieldTolerance, FieldIDHeader, FieldSecrets, FieldHMACAlgorithm, FieldSignatureHeader, FieldSignatureEncoding}},
		{"second secret empty", ProviderConfig{Scheme: SchemeGitHub, Secrets: []string{"s", ""}}, []Field{FieldSecrets}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Name = "x"
			_, err := NewProvider(tc.cfg)
			if err == nil {
				t.Fatal("accepted")
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("no FieldError in %v", err)
			}
			var got []Field
			for _, fe := range FieldErrors(err) {
				got = append(got, fe.Field)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("fields %v, want %v (error: %v)", got, tc.want, err)
			}
		})
	}
	_, err := NewProvider(ProviderConfig{Name: "x", Scheme: SchemeGitHub, Secrets: []string{"s", ""}})
	if fes := FieldErrors(err); len(fes) != 1 || fes[0].Index != 1 {
		t.Fatalf("empty second secret: %+v", fes)
	}
}

// The registry's required settings are exactly what an empty configuration
// of each scheme is refused for.
func TestRequiredFieldsMatchConstructors(t *testing.T) {
	for _, scheme := range KnownSchemes() {
		_, err := NewProvider(ProviderConfig{Name: "x", Scheme: scheme})
		var got []Field
		for _, fe := range FieldErrors(err) {
			got = append(got, fe.Field)
		}
		if want := RequiredFields(scheme); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: empty configuration refused for %v, registry requires %v (error: %v)", scheme, got, want, err)
		}
	}
	if RequiredFields("nope") != nil || DefaultTolerance("nope") != 0 {
		t.Error("unknown scheme has requirements or a tolerance")
	}
}
