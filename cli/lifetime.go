package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/airlock-dev/airlock/client"
)

// lifetimeFlags are up's --timeout, --on-timeout, --idle-timeout and
// --on-idle: the sandbox's lifetime (docs/api.md, Lifetimes).
type lifetimeFlags struct {
	timeout, idle     time.Duration
	onTimeout, onIdle string
}

func (lf *lifetimeFlags) add(f *pflag.FlagSet) {
	f.DurationVar(&lf.timeout, "timeout", 0, "delete the sandbox this long from now (e.g. 2h; --on-timeout stop stops it instead)")
	f.StringVar(&lf.onTimeout, "on-timeout", "", "what --timeout does: delete (default) or stop")
	f.DurationVar(&lf.idle, "idle-timeout", 0, "delete the sandbox once ready and unused this long, instead of runtime.idle_ttl (--on-idle stop stops it)")
	f.StringVar(&lf.onIdle, "on-idle", "", "what --idle-timeout does: delete (default), stop, or pause (frozen until airlock unpause)")
}

// check refuses flags the daemon would refuse, before anything is made.
func (lf *lifetimeFlags) check() error {
	for _, p := range []struct {
		name, v string
		d       time.Duration
		dname   string
	}{{"--on-timeout", lf.onTimeout, lf.timeout, "--timeout"}, {"--on-idle", lf.onIdle, lf.idle, "--idle-timeout"}} {
		// An idle sandbox may also be paused (not one at its deadline).
		idlePause := p.name == "--on-idle" && p.v == client.OnExpiryPause
		if p.v != "" && p.v != client.OnExpiryDelete && p.v != client.OnExpiryStop && !idlePause {
			return withCode(ExitUsage, fmt.Errorf("invalid %s %q: use delete or stop", p.name, p.v))
		}
		if p.v != "" && p.d == 0 {
			return withCode(ExitUsage, fmt.Errorf("%s needs %s", p.name, p.dname))
		}
	}
	if lf.timeout < 0 || lf.idle < 0 {
		return withCode(ExitUsage, fmt.Errorf("invalid --timeout or --idle-timeout: a duration is not negative"))
	}
	return nil
}

// request is the lifetime of a new sandbox.
func (lf *lifetimeFlags) request() client.LifetimeRequest {
	return client.LifetimeRequest{Timeout: lf.timeout.Seconds(), OnTimeout: lf.onTimeout, IdleTimeout: lf.idle.Seconds(), OnIdle: lf.onIdle}
}

// apply gives an existing sandbox the lifetime the flags say (nothing when
// none was given).
func (lf *lifetimeFlags) apply(ctx context.Context, c *client.Client, id string) error {
	var u client.UpdateRequest
	if lf.timeout > 0 {
		secs, on := lf.timeout.Seconds(), lf.onTimeout
		u.Timeout = &secs
		if on == "" {
			on = client.OnExpiryDelete
		}
		u.OnTimeout = &on
	}
	if lf.idle > 0 {
		secs, on := lf.idle.Seconds(), lf.onIdle
		u.IdleTimeout = &secs
		if on == "" {
			on = client.OnExpiryDelete
		}
		u.OnIdle = &on
	}
	if u.Timeout == nil && u.IdleTimeout == nil {
		return nil
	}
	if _, err := c.Update(ctx, id, &u); err != nil {
		return apiFailure(err)
	}
	return nil
}
