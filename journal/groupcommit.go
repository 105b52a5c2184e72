package journal

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/whguard/whguard/internal/groupcommit"
	"github.com/whguard/whguard/internal/tracing"
)

// GroupCommitter gathers concurrent Append calls into shared batches: one
// multi-row INSERT … ON CONFLICT and one commit for all the requests that
// arrived while the previous commit ran (docs/groupcommit.md). A request
// alone is committed at once; under load, batches grow up to 100 events.
// Each caller learns its own outcomes; a failed commit fails exactly the
// requests of its batch. Append's batch API is what made this possible
// without changing any caller.
type GroupCommitter struct {
	g *groupcommit.Group[Event, Result]
	// tracer, when set, makes a "journal commit" span of each wait.
	tracer trace.Tracer
}

// NewGroupCommitter wraps a store's Append. maxInFlight bounds concurrent
// commits (0 means 1: everything arriving during a commit shares the next).
// onCommit, when set, is told each commit's size and duration.
func NewGroupCommitter(s interface {
	Append(ctx context.Context, events []Event) ([]Result, error)
}, maxInFlight int, onCommit func(events int, took time.Duration, err error)) *GroupCommitter {
	return &GroupCommitter{g: groupcommit.New(groupcommit.Config{MaxBatch: 100, MaxInFlight: maxInFlight, OnFlush: onCommit}, s.Append)}
}

// Traced makes the committer record each caller's wait for its shared
// commit as a "journal commit" span under the caller's span (none for a
// caller without one), with the commit's batch size; nil records none.
func (c *GroupCommitter) Traced(t trace.Tracer) *GroupCommitter {
	c.tracer = t
	return c
}

// Append journals events in the next shared batch. An error means the
// events are not known to be committed: never acknowledge them.
func (c *GroupCommitter) Append(ctx context.Context, events []Event) ([]Result, error) {
	if c.tracer == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return c.g.Do(ctx, events)
	}
	ctx, span := c.tracer.Start(ctx, "journal commit")
	res, batch, err := c.g.DoBatch(ctx, events)
	span.SetAttributes(tracing.AttrBatchSize.Int(batch))
	if err != nil {
		span.SetStatus(codes.Error, "commit failed")
	}
	span.End()
	return res, err
}
