package kubetest

import (
	"context"
	"errors"
	"time"

	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/kubernetes"
)

// Move is what one of the operator's moves did, and when.
type Move struct {
	From, To *failovertest.Node
	// Announced is when the operator named the next primary: when it
	// sent the write of status.targetPrimary (CloudNativePG only; zero for
	// the others). A watch may see the write before its answer returns.
	Announced time.Time
	// Writable is when the new primary first answered that it is out of
	// recovery, polled every millisecond over a connection of its own.
	Writable time.Time
	// Labelled is when the operator began its last writes of the move:
	// the role labels (and CloudNativePG's currentPrimary) naming the new
	// primary.
	Labelled time.Time
}

// Switchover moves the primary role to the standby to (nil means the
// best one) as the operator does for a planned switchover. CloudNativePG
// first writes targetPrimary, then (its instance manager reacting, see
// AnnouncementLead) stops the primary, promotes the
// target, and writes currentPrimary and the labels; the old primary comes
// back as a replica. Its pod stays ready throughout, as a kubelet whose
// readiness probe runs every few seconds would leave it through a fast
// switchover. The others only relabel the pods once the promotion is done.
func (c *Cluster) Switchover(ctx context.Context, to *failovertest.Node) (Move, error) {
	c.move.Lock()
	defer c.move.Unlock()
	from := c.PG.Primary()
	if to == nil {
		var err error
		if to, err = c.PG.BestStandby(ctx); err != nil {
			return Move{}, err
		}
	}
	m := Move{From: from, To: to}
	if to == from {
		return m, errors.New("kubetest: the switchover's target is the primary")
	}
	if c.Operator == CloudNativePG {
		m.Announced = time.Now()
		if err := c.API.SetClusterStatus(ctx, c.Namespace, c.Name, "", c.Pod(to)); err != nil {
			return m, err
		}
		if err := sleep(ctx, c.lead); err != nil {
			return m, err
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	writable := waitWritable(wctx, to)
	_, err := c.PG.Switchover(ctx, to)
	cancel()
	m.Writable = <-writable
	if err != nil {
		return m, err
	}
	m.Labelled = time.Now()
	return m, c.relabel(ctx, from, to)
}

// Failover loses the primary as the operator handles it: the primary
// crashes and its pod goes unready; CloudNativePG writes targetPrimary
// "pending", then the best standby's pod; the best standby is promoted
// after promoteAfter; the operator writes currentPrimary and relabels the
// pods. The old primary stays down; Rejoin brings it back.
func (c *Cluster) Failover(ctx context.Context, promoteAfter time.Duration) (Move, error) {
	c.move.Lock()
	defer c.move.Unlock()
	from, err := c.PG.CrashPrimary(ctx)
	if err != nil {
		return Move{}, err
	}
	m := Move{From: from}
	if err := c.API.SetPodStatus(ctx, c.Namespace, c.Pod(from), "", false); err != nil {
		return m, err
	}
	if c.Operator == CloudNativePG {
		if err := c.API.SetClusterStatus(ctx, c.Namespace, c.Name, "", kubernetes.PendingFailover); err != nil {
			return m, err
		}
	}
	if m.To, err = c.PG.BestStandby(ctx); err != nil {
		return m, err
	}
	if c.Operator == CloudNativePG {
		m.Announced = time.Now()
		if err := c.API.SetClusterStatus(ctx, c.Namespace, c.Name, "", c.Pod(m.To)); err != nil {
			return m, err
		}
	}
	if err := sleep(ctx, promoteAfter); err != nil {
		return m, err
	}
	wctx, cancel := context.WithCancel(ctx)
	writable := waitWritable(wctx, m.To)
	err = c.PG.Promote(ctx, m.To)
	cancel()
	m.Writable = <-writable
	if err != nil {
		return m, err
	}
	m.Labelled = time.Now()
	if err := c.relabel(ctx, from, m.To); err != nil {
		return m, err
	}
	return m, nil
}

// relabel writes the labels (and CloudNativePG's currentPrimary) that
// name to the primary and from a replica.
func (c *Cluster) relabel(ctx context.Context, from, to *failovertest.Node) error {
	if c.Operator == CloudNativePG {
		if err := c.API.SetClusterStatus(ctx, c.Namespace, c.Name, c.Pod(to), ""); err != nil {
			return err
		}
	}
	if err := c.API.SetLabels(ctx, c.Namespace, c.Pod(to), c.labels(true)); err != nil {
		return err
	}
	return c.API.SetLabels(ctx, c.Namespace, c.Pod(from), c.labels(false))
}

// Rejoin brings n (a primary a Failover left down) back as a standby of
// the current primary, and its pod back to ready.
func (c *Cluster) Rejoin(ctx context.Context, n *failovertest.Node) error {
	c.move.Lock()
	defer c.move.Unlock()
	if err := c.PG.Rejoin(ctx, n); err != nil {
		return err
	}
	return c.API.SetPodStatus(ctx, c.Namespace, c.Pod(n), "", true)
}

// Reschedule moves n's pod as Kubernetes does when it evicts and
// recreates it: the pod is deleted, its address stops answering and
// every connection to it is cut; a pod of the same name and labels is
// created, and becomes ready at a new address. It returns the new
// address (ip:5432). The server behind it keeps running.
func (c *Cluster) Reschedule(ctx context.Context, n *failovertest.Node) (string, error) {
	c.move.Lock()
	defer c.move.Unlock()
	c.mu.Lock()
	p := c.pods[n]
	delete(c.pods, n)
	c.mu.Unlock()
	if p == nil {
		return "", errors.New("kubetest: the node has no pod")
	}
	if err := c.API.DeletePod(ctx, c.Namespace, p.name); err != nil {
		return "", err
	}
	p.fwd.close()
	primary := n == c.PG.Primary()
	if err := c.API.CreatePod(ctx, c.Namespace, Pod{Name: p.name, Labels: c.labels(primary)}); err != nil {
		return "", err
	}
	if err := c.place(ctx, n, p.name, p.ip); err != nil {
		return "", err
	}
	return c.PodAddr(n), nil
}

// sleep waits d, or until ctx ends. It plays the time an operator takes
// between two steps: part of the scenario, not a wait for a condition.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
