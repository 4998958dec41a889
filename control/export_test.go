package control

import "time"

// SetPruneClock makes f prune's clock until restore is called.
func SetPruneClock(f func() time.Time) (restore func()) {
	pruneClock.Store(&f)
	return func() { pruneClock.Store(nil) }
}
