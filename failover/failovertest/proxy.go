package failovertest

// proxy is the fault proxy in front of a node; the zero value is none.
type proxy struct{}

func (proxy) addr() string { return "" }

func (c *Cluster) startProxies() error { return nil }

func (c *Cluster) closeProxies() {}
