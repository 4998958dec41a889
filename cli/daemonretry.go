package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/airlock-dev/airlock/client"
)

// lostDaemon reports whether err is the control daemon going away (a broken or
// refused connection), not an answer of its.
func lostDaemon(err error) bool {
	var ce *client.Error
	return err != nil && !errors.As(err, &ce) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// retryDaemon calls f, and while the control daemon is gone (killed, upgraded:
// a refused connection, a missing socket, a stream cut short), makes sure one
// runs again (starting it) and calls f again, with a backoff from 50 ms, for up
// to daemonRetryLimit; then it fails saying so.
func retryDaemon[T any](a *app, ctx context.Context, f func() (T, error)) (T, error) {
	b := backoff.WithContext(backoff.NewExponentialBackOff(backoff.WithInitialInterval(50*time.Millisecond),
		backoff.WithMaxInterval(time.Second), backoff.WithMaxElapsedTime(daemonRetryLimit)), ctx)
	var out T
	tries := 0
	err := backoff.Retry(func() error {
		tries++
		v, err := f()
		if err == nil {
			out = v
			return nil
		}
		if !lostDaemon(err) {
			return backoff.Permanent(err)
		}
		a.daemonLost.Store(true)
		if _, derr := a.daemonClientAgain(ctx); derr != nil {
			return backoff.Permanent(derr) // it could not start: it says why
		}
		v, err = f()
		if err != nil && !lostDaemon(err) {
			return backoff.Permanent(err)
		}
		out = v
		return err
	}, b)
	if err != nil && lostDaemon(err) && ctx.Err() == nil {
		var ee *exitError
		if errors.As(err, &ee) {
			return out, err // the daemon could not start: it says why
		}
		return out, fmt.Errorf("cannot reach the airlock daemon again: it went away and was started again, and still failed %d time(s) within %v: %w", tries, daemonRetryLimit, err)
	}
	return out, err
}

// setupDaemonFailure explains a failure to talk to the control daemon while the
// sandbox is set up: a daemon that went away is said so, not as a bare EOF.
func setupDaemonFailure(err error) error {
	if lostDaemon(err) {
		return withCode(ExitAirlock, fmt.Errorf("the airlock control daemon went away while the sandbox was being set up (%v); nothing was left behind: run it again", err))
	}
	return apiFailure(err)
}

// apiReason is the API error reason of err, "" for another error.
func apiReason(err error) string {
	var ce *client.Error
	if errors.As(err, &ce) {
		return ce.Reason
	}
	return ""
}
