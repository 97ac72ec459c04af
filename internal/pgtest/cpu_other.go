//go:build !linux

package pgtest

import (
	"errors"
	"time"
)

// CPUTime needs /proc, which only Linux has.
func (n *Node) CPUTime() (time.Duration, error) {
	return 0, errors.New("pgtest: CPUTime reads /proc, which this system lacks")
}

// BackendCPUTime needs /proc, which only Linux has.
func (n *Node) BackendCPUTime() (time.Duration, error) {
	return 0, errors.New("pgtest: BackendCPUTime reads /proc, which this system lacks")
}

// BackendCPUTimes needs /proc, which only Linux has.
func (n *Node) BackendCPUTimes() (map[int]time.Duration, error) {
	return nil, errors.New("pgtest: BackendCPUTimes reads /proc, which this system lacks")
}
