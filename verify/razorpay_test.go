package verify

import (
	"testing"
	"time"
)

// Razorpay's published vector: razorpay-go resources/verify_payment_test.go
// (TestVerifyWebhookSignature), the payment.authorized body verbatim,
// secret 123456 (https://razorpay.com/docs/webhooks/validate-test/).
const (
	razorpayPublishedSecret    = "123456"
	razorpayPublishedSignature = "ea962f3a2a8090aa14ef10fc178306edcb46ee7ccadae8afe2275cda26f3d2a6"
	razorpayPublishedBody      = `{"entity":"event","account_id":"acc_HVFD0PFnHPAzKj","event":"payment.authorized","contains":["payment"],"payload":{"payment":{"entity":{"id":"pay_JUEM4c0pSLpFEW","entity":"payment","amount":12300,"currency":"INR","status":"authorized","order_id":"order_JUELuT6cFaHkvd","invoice_id":null,"international":false,"method":"netbanking","amount_refunded":0,"refund_status":null,"captured":false,"description":"#JUELZ1z1EC0pwi","card_id":null,"bank":"SBIN","wallet":null,"vpa":null,"email":"prathmesh.bijjargi@razorpay.com","contact":"+917411714931","notes":[],"fee":null,"tax":null,"error_code":null,"error_description":null,"error_source":null,"error_step":null,"error_reason":null,"acquirer_data":{"bank_transaction_id":"6416615"},"created_at":1652339804}}},"created_at":1652339806}`
)

// TestRazorpayPublishedVector: the SDK's vector verifies through the
// public path, with and without the unsigned event id header.
func TestRazorpayPublishedVector(t *testing.T) {
	if len(razorpayPublishedBody) != 778 {
		t.Fatalf("body is %d bytes, the SDK test's is 778", len(razorpayPublishedBody))
	}
	p := mustProvider(t, ProviderConfig{Name: "rzp", Scheme: SchemeRazorpay, Secrets: []string{razorpayPublishedSecret}})
	in := Input{Header: headers("X-Razorpay-Signature", razorpayPublishedSignature), Body: []byte(razorpayPublishedBody)}
	ev, err := p.Check(in, time.Now())
	if err != nil || ev.Type != "payment.authorized" || ev.ID != canonicalDigest(t, razorpayPublishedBody) {
		t.Fatalf("published vector: %+v, %v", ev, err)
	}
	// The unsigned event id header, when sent, is the id.
	in.Header.Set("X-Razorpay-Event-Id", "JUEM5Ww8Yl2Xq4")
	if ev, err := p.Check(in, time.Now()); err != nil || ev.ID != "JUEM5Ww8Yl2Xq4" {
		t.Fatalf("with the event id header: %+v, %v", ev, err)
	}
	// One byte changed anywhere breaks it.
	tampered := []byte(razorpayPublishedBody)
	tampered[len(tampered)-2]++
	if _, err := p.Check(Input{Header: in.Header, Body: tampered}, time.Now()); Reason(err) != ReasonSignatureMismatch {
		t.Fatalf("tampered published body: %v", err)
	}
}
