// Package ctxtime is sleeping that ends early when a context does.
package ctxtime

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx is done (then its error). d <= 0 returns at once.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// SleepUntil waits until t, or until ctx is done.
func SleepUntil(ctx context.Context, t time.Time) error { return Sleep(ctx, time.Until(t)) }
