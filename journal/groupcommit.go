package journal

import (
	"context"
	"time"

	"github.com/whguard/whguard/internal/groupcommit"
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
}

// NewGroupCommitter wraps a store's Append. maxInFlight bounds concurrent
// commits (0 means 1: everything arriving during a commit shares the next).
// onCommit, when set, is told each commit's size and duration.
func NewGroupCommitter(s interface {
	Append(ctx context.Context, events []Event) ([]Result, error)
}, maxInFlight int, onCommit func(events int, took time.Duration, err error)) *GroupCommitter {
	return &GroupCommitter{g: groupcommit.New(groupcommit.Config{MaxBatch: 100, MaxInFlight: maxInFlight, OnFlush: onCommit}, s.Append)}
}

// Append journals events in the next shared batch. An error means the
// events are not known to be committed: never acknowledge them.
func (c *GroupCommitter) Append(ctx context.Context, events []Event) ([]Result, error) {
	return c.g.Do(ctx, events)
}
