package e2e

// isRunning accepts the runtime's "running" and the control daemon's "ready" (design.md §8).
func isRunning(state string) bool { return state == "running" || state == "ready" }
