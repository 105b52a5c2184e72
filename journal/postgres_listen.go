package journal

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// Listen holds a dedicated connection LISTENing on NotifyChannel and calls
// wake for every notification from another process, until ctx ends. A broken connection is
// re-established with a growing pause (up to 10 s); meanwhile the
// forwarder's poll is the fallback. It returns ctx.Err().
func (p *Postgres) Listen(ctx context.Context, wake func()) error {
	pause := 100 * time.Millisecond
	for ctx.Err() == nil {
		if !p.hasSession() {
			// Behind a pooler with no direct connection: LISTEN would be
			// lost with the transaction; the forwarder's poll finds rows.
			p.logNoSession()
			<-ctx.Done()
			break
		}
		err := p.listenOnce(ctx, wake)
		if ctx.Err() != nil {
			break
		}
		p.log.Warn("LISTEN connection lost; polling until it is back", zap.Error(err), zap.Duration("retry_in", pause))
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
		pause = min(pause*2, 10*time.Second)
	}
	return ctx.Err()
}

func (p *Postgres) listenOnce(ctx context.Context, wake func()) error {
	conn, err := p.sessionConn(ctx)
	if err != nil {
		return fmt.Errorf("LISTEN: %w", err)
	}
	defer closeSession(ctx, conn)
	if _, err := conn.Exec(ctx, "LISTEN "+NotifyChannel); err != nil {
		return fmt.Errorf("LISTEN %s: %w", NotifyChannel, err)
	}
	// Rows may have been committed while we were not listening.
	wake()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("wait for notification: %w", err)
		}
		if n.Payload != p.instance {
			wake()
		}
	}
}
