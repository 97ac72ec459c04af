package kubetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// KubernetesVersion is the kube-apiserver release the harness runs.
const KubernetesVersion = "v1.34.2"

// DefaultCacheDir is where the built kube-apiserver is kept between runs.
const DefaultCacheDir = "/var/cache/pgfailover-kube"

// EnvAPIServer names an environment variable that, when set, gives the
// path of a kube-apiserver binary to run instead of the cached build.
const EnvAPIServer = "PGFAILOVER_KUBE_APISERVER"

// stagingVersion is the release of the staging modules (k8s.io/api and
// the rest) that goes with KubernetesVersion.
var stagingVersion = "v0" + strings.TrimPrefix(KubernetesVersion, "v1")

// CachedAPIServer returns the path of the cached kube-apiserver binary:
// $PGFAILOVER_KUBE_APISERVER when set, else
// DefaultCacheDir/kube-apiserver-<KubernetesVersion>.
func CachedAPIServer() string {
	if p := os.Getenv(EnvAPIServer); p != "" {
		return p
	}
	return filepath.Join(DefaultCacheDir, "kube-apiserver-"+KubernetesVersion)
}

// APIServerBinary returns the path of a kube-apiserver binary, building
// it into the cache first when it is missing (see BuildAPIServer): a few
// minutes, once per machine.
func APIServerBinary(ctx context.Context) (string, error) {
	path := CachedAPIServer()
	if _, err := os.Stat(path); err == nil {
		return path, nil
	} else if os.Getenv(EnvAPIServer) != "" {
		return "", fmt.Errorf("kubetest: %s: %w", EnvAPIServer, err)
	}
	if err := BuildAPIServer(ctx, path); err != nil {
		return "", err
	}
	return path, nil
}

// BuildAPIServer builds kube-apiserver at KubernetesVersion into dst with
// the go command on PATH: it downloads the k8s.io/kubernetes module,
// points each of its replace directives into ./staging at the staging
// module's release instead (a module download has no staging tree), and
// runs go build. The binary is written beside dst and renamed into place,
// so a reader never sees half a file.
func BuildAPIServer(ctx context.Context, dst string) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("kubetest: building kube-apiserver %s: "+format, append([]any{KubernetesVersion}, args...)...)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fail("%w", err)
	}
	work, err := os.MkdirTemp("", "kube-apiserver-build-")
	if err != nil {
		return fail("%w", err)
	}
	defer os.RemoveAll(work)
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	run := func(dir string, args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir, cmd.Env = dir, env
		cmd.SysProcAttr = childAttr() // no build left running should the test die
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fail("go %s: %v\n%s", strings.Join(args, " "), err, tail(stderr.String(), 4000))
		}
		return out, nil
	}
	out, err := run(work, "mod", "download", "-json", "k8s.io/kubernetes@"+KubernetesVersion)
	if err != nil {
		return err
	}
	var dl struct{ Dir string }
	if err := json.Unmarshal(out, &dl); err != nil || dl.Dir == "" {
		return fail("go mod download gave no directory")
	}
	src := filepath.Join(work, "src")
	if err := os.CopyFS(src, os.DirFS(dl.Dir)); err != nil {
		return fail("copying the module: %w", err)
	}
	// The module cache is read-only, and so is the copy.
	_ = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			mode := os.FileMode(0o644)
			if d.IsDir() {
				mode = 0o755
			}
			_ = os.Chmod(p, mode)
		}
		return nil
	})
	for _, f := range []string{"go.work", "go.work.sum"} {
		_ = os.Remove(filepath.Join(src, f))
	}
	gomod := filepath.Join(src, "go.mod")
	b, err := os.ReadFile(gomod)
	if err != nil {
		return fail("%w", err)
	}
	b = stagingReplace.ReplaceAll(b, []byte("${1}${2} => ${2} "+stagingVersion))
	if err := os.WriteFile(gomod, b, 0o644); err != nil {
		return fail("%w", err)
	}
	tmp := dst + ".building"
	if _, err := run(src, "build", "-trimpath", "-o", tmp, "./cmd/kube-apiserver"); err != nil {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fail("%w", err)
	}
	return nil
}

// stagingReplace matches a replace directive of k8s.io/kubernetes's
// go.mod that points a staging module into the source tree.
var stagingReplace = regexp.MustCompile(`(?m)^(\s*)(k8s\.io/[A-Za-z0-9._-]+) => \./staging/src/k8s\.io/[A-Za-z0-9._-]+\s*$`)

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
