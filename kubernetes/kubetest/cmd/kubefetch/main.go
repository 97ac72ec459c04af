// Command kubefetch makes sure the kube-apiserver that package kubetest
// runs is built and cached (kubetest.CachedAPIServer), building it when
// it is missing, and prints its path. CI runs it before the tests, so the
// build happens in a step of its own; running it again does nothing.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/pgfailover/pgfailover/kubernetes/kubetest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	path, err := kubetest.APIServerBinary(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(path)
}
