// Package tracing sets up whguard's OpenTelemetry traces from the standard
// OTEL_* variables alone (docs/operations.md, "Traces"), and carries a
// trace's context between a webhook's receipt and its deliveries: through
// the journal as text, and to the backend in the formats OTEL_PROPAGATORS
// names (W3C traceparent/tracestate unless it names others).
//
// Tracing is off unless the environment asks for it; off, nothing of it
// runs: no tracer, no span, no header touched, nothing stored.
package tracing

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Exporters, the values of OTEL_TRACES_EXPORTER whguard takes.
const (
	ExporterOTLP    = "otlp"
	ExporterConsole = "console"
	ExporterNone    = "none"
)

// OTLP protocols, the values of OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL
// whguard takes.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Config is what the environment asks of tracing. The zero value is off.
type Config struct {
	// Exporters are where spans go (ExporterOTLP, ExporterConsole), in
	// the order named; none: tracing is off.
	Exporters []string
	// Protocol is the OTLP exporter's (ProtocolHTTP or ProtocolGRPC).
	Protocol string
	// Propagators name the formats of the trace context read from
	// senders and written to backends (OTEL_PROPAGATORS, checked); nil:
	// W3C Trace Context. NewPropagator makes them one Propagator.
	Propagators []string
}

// On reports whether spans are made at all.
func (c Config) On() bool { return len(c.Exporters) > 0 }

// VarError is a variable whose value tracing cannot use.
type VarError struct {
	Var string
	Msg string
}

func (e *VarError) Error() string { return e.Var + ": " + e.Msg }

// bspVars are the batch span processor's settings, counts or milliseconds.
var bspVars = []string{"OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_SCHEDULE_DELAY", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "OTEL_BSP_EXPORT_TIMEOUT"}

// FromEnv decides from the OTEL_* variables (getenv returns "" for an unset
// one) whether traces are on, and where they go:
//   - OTEL_SDK_DISABLED=true turns them off, whatever else is set;
//   - OTEL_TRACES_EXPORTER, a comma list of otlp and console, turns them
//     on; none turns them off;
//   - unset, they are on (otlp) when OTEL_EXPORTER_OTLP_ENDPOINT or
//     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, else off.
//
// With traces on, OTEL_PROPAGATORS names the trace context's formats, and
// the OTEL_BSP_* settings, when set, must be positive integers.
// The OTLP protocol is OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else
// OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf. A value whguard cannot
// honour is a *VarError naming its variable: a collector that silently
// gets nothing is worse than a refusal to start.
func FromEnv(getenv func(string) string) (Config, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return Config{}, nil
	}
	var c Config
	if list := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); list != "" {
		for name := range strings.SplitSeq(list, ",") {
			switch name = strings.ToLower(strings.TrimSpace(name)); name {
			case ExporterNone:
				return Config{}, nil
			case ExporterOTLP, ExporterConsole:
				if !slices.Contains(c.Exporters, name) {
					c.Exporters = append(c.Exporters, name)
				}
			case "":
			default:
				return Config{}, &VarError{Var: "OTEL_TRACES_EXPORTER",
					Msg: fmt.Sprintf("%q is not an exporter whguard has (otlp, console or none)", name)}
			}
		}
	} else if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" {
		c.Exporters = []string{ExporterOTLP}
	}
	if !c.On() {
		return c, nil
	}
	props, err := parsePropagators(getenv("OTEL_PROPAGATORS"))
	if err != nil {
		return Config{}, err
	}
	c.Propagators = props
	// The SDK takes 0 and negative values as they are (a negative queue
	// or batch size panics as it starts; a zero delay exports span by
	// span): a value set must be a positive integer.
	for _, v := range bspVars {
		if raw := strings.TrimSpace(getenv(v)); raw != "" {
			if n, err := strconv.Atoi(raw); err != nil || n <= 0 {
				return Config{}, &VarError{Var: v, Msg: fmt.Sprintf("%q is not a positive integer", raw)}
			}
		}
	}
	if !slices.Contains(c.Exporters, ExporterOTLP) {
		return c, nil
	}
	name, proto := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	if proto == "" {
		name, proto = "OTEL_EXPORTER_OTLP_PROTOCOL", strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	switch proto {
	case "", ProtocolHTTP:
		c.Protocol = ProtocolHTTP
	case ProtocolGRPC:
		c.Protocol = ProtocolGRPC
	default:
		return Config{}, &VarError{Var: name, Msg: fmt.Sprintf("%q is not a protocol whguard exports with (http/protobuf or grpc)", proto)}
	}
	return c, nil
}
