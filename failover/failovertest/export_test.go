package failovertest

// MovePending reports whether a move of the endpoint e, scheduled by a
// drill, has yet to happen: until it does, new connections still go where
// they went before the drill.
func MovePending(e *Endpoint) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.timer != nil
}
