package main

import (
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// The sink's span count walks the wire format: it agrees with a full
// decoding across resources and scopes, and refuses a cut export.
func TestCountSpans(t *testing.T) {
	span := func(name string) *tracepb.Span {
		return &tracepb.Span{Name: name, TraceId: make([]byte, 16), SpanId: make([]byte, 8),
			Attributes: []*commonpb.KeyValue{{Key: "k", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 7}}}}}
	}
	req := &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{
		{Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{{Key: "service.name"}}},
			ScopeSpans: []*tracepb.ScopeSpans{
				{Scope: &commonpb.InstrumentationScope{Name: "a"}, Spans: []*tracepb.Span{span("1"), span("2"), span("3")}},
				{Spans: []*tracepb.Span{span("4")}},
			}},
		{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{span("5"), span("6")}}}, SchemaUrl: "x"},
	}}
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := countSpans(b); n != 6 || err != nil {
		t.Fatalf("countSpans = %d, %v; want 6", n, err)
	}
	if _, err := countSpans(b[:len(b)-3]); err == nil {
		t.Fatal("a cut export was counted without an error")
	}
}
