package proxy

import (
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/whguard/whguard/internal/fields"
)

func TestIngressConfigValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		cfg    IngressConfig
		fields []string
	}{
		{"defaults", IngressConfig{Routes: []Route{{Path: "/a"}}}, nil},
		{"bad paths", IngressConfig{Routes: []Route{{Path: "a"}, {Path: "/b?x"}, {Path: "/c", ForwardPath: "c"}}},
			[]string{"Routes[0].Path", "Routes[1].Path", "Routes[2].ForwardPath"}},
		{"shared path", IngressConfig{Routes: []Route{{Path: "/a"}, {Path: "/a"}}}, []string{"Routes[1].Path"}},
		{"route limit above the budget's share", IngressConfig{MaxBufferedBytes: 4 << 20, Routes: []Route{{Path: "/a", MaxBodyBytes: 4 << 20}}},
			[]string{"Routes[0].MaxBodyBytes"}},
		{"shared limit above the share, said once", IngressConfig{MaxBufferedBytes: 1 << 20, MaxBodyBytes: 1 << 20, Routes: []Route{{Path: "/a"}, {Path: "/b"}}},
			[]string{"MaxBodyBytes"}},
		{"negative budget", IngressConfig{MaxBufferedBytes: -1}, []string{"MaxBufferedBytes"}},
		{"sync wait too long", IngressConfig{Routes: []Route{{Path: "/a", Sync: true, SyncTimeout: time.Minute}}}, []string{"Routes[0].SyncTimeout"}},
		{"sync wait on an async route", IngressConfig{Routes: []Route{{Path: "/a", SyncTimeout: time.Second}}}, []string{"Routes[0].SyncTimeout"}},
		{"bad filter items", IngressConfig{Routes: []Route{{Path: "/a", EventTypes: []string{"ok.*", "", strings.Repeat("a", 257)}}}},
			[]string{"Routes[0].EventTypes", "Routes[0].EventTypes"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, fe := range fields.All(tc.cfg.WithDefaults().Validate()) {
				got = append(got, fe.Field)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.fields) {
				t.Fatalf("fields at fault %v, want %v", got, tc.fields)
			}
		})
	}
	// The three-quarter rule names the budget and what would do.
	err := IngressConfig{MaxBufferedBytes: 4 << 20, Routes: []Route{{Path: "/a", MaxBodyBytes: 4 << 20}}}.WithDefaults().Validate()
	msg := fields.All(err)[0].Message(func(f string) string { return "BUDGET" })
	if !strings.Contains(msg, "three quarters of BUDGET (3145728)") || !strings.Contains(msg, "at least 5592406") {
		t.Fatalf("message %q", msg)
	}
	// A sync route's zero wait is the default one.
	if r := (IngressConfig{Routes: []Route{{Path: "/a", Sync: true}}}).WithDefaults().Routes[0]; r.SyncTimeout != DefaultSyncTimeout {
		t.Fatalf("sync wait %s", r.SyncTimeout)
	}
}

// The read limit never overflows: distinct bodies read as themselves
// under a limit at the edge of int64.
func TestReadLimitedAtTheEdge(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`{"n":1}`, `{"n":2}`} {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		r.ContentLength = -1
		b, buf, err := readLimited(r, math.MaxInt64)
		if err != nil || string(b) != body {
			t.Fatalf("read %q, %v; want %q", b, err, body)
		}
		putBody(buf)
	}
}
