package benchdoc

import (
	"sync"
	"time"
)

// Each runs f for 0..n-1, workers at a time, and returns the wall time and
// the errors f returned.
func Each(n, workers int, f func(i int) error) (time.Duration, []error) {
	var mu sync.Mutex
	var errs []error
	next := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return time.Since(start), errs
}
