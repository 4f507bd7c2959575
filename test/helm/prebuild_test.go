package helm

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The builds of TestRelease (make release) and TestUpgradeFromThePreviousRelease
// (a manager from previousCommit) are compiles of a minute or more on two
// cores. TestMain starts them beside the tests that wait on rollouts, and
// each of the two waits for its own.
var (
	releaseBuild  *prebuild
	previousBuild *prebuild
)

const releaseVersion, releaseChartVersion = "v0.0.1-releasetest", "0.0.1-releasetest"

// prebuild is a command started in TestMain; its test waits for it.
type prebuild struct {
	name   string
	done   chan struct{}
	cancel context.CancelFunc
	out    []byte
	err    error
	took   time.Duration
	// dir is the build's own folder, removed when the package ends.
	dir string
	// cleanup undoes what else the build left (a git worktree, a binary).
	cleanup func()
}

// startPrebuilds starts the builds of the selected tests (-run, -skip) and
// returns what removes their outputs once the tests are done.
func startPrebuilds(root string) (stop func()) {
	sweepPrebuilds(root)
	var started []*prebuild
	if selected("TestRelease") {
		releaseBuild = startRelease(root)
		started = append(started, releaseBuild)
	}
	if selected("TestUpgradeFromThePreviousRelease") {
		previousBuild = startPrevious(root)
		started = append(started, previousBuild)
	}
	return func() {
		for _, b := range started {
			b.cancel()
			<-b.done
			if b.cleanup != nil {
				b.cleanup()
			}
			os.RemoveAll(b.dir)
		}
	}
}

// selected approximates go test's -run and -skip for a top-level test: a
// build nobody waits for would only take cores from the tests that run.
func selected(name string) bool {
	flag.Parse()
	matches := func(flagName string) (bool, bool) {
		f := flag.Lookup(flagName)
		if f == nil || f.Value.String() == "" {
			return false, false
		}
		re, err := regexp.Compile(strings.Split(f.Value.String(), "/")[0])
		return err != nil || re.MatchString(name), true
	}
	if m, set := matches("test.run"); set && !m {
		return false
	}
	if m, set := matches("test.skip"); set && m {
		return false
	}
	return true
}

// prebuildPrefix starts the name of a build's folder, then the pid of the
// test binary that made it.
const prebuildPrefix = "rainbow-helm-"

// sweepPrebuilds removes what earlier runs' builds left when their test
// binary died before its cleanup (a failed harness start exits at once, a
// timeout kills): folders and previous managers whose pid is gone, and the
// worktrees git then knows to be missing.
func sweepPrebuilds(root string) {
	gone := func(name, prefix string) bool {
		rest, ok := strings.CutPrefix(name, prefix)
		pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
		// Signal 0 checks that the process exists without touching it.
		return ok && err == nil && pid != os.Getpid() && syscall.Kill(pid, 0) == syscall.ESRCH
	}
	sweep := func(dir, prefix string) {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if gone(e.Name(), prefix) {
				os.RemoveAll(filepath.Join(dir, e.Name()))
			}
		}
	}
	sweep(os.TempDir(), prebuildPrefix)
	sweep(filepath.Join(root, ".cache", "bin"), "manager-previous-")
	_ = exec.Command("git", "-C", root, "worktree", "prune").Run()
}

// newPrebuild makes a build and its folder; without a folder it is done,
// failed, and ok is false.
func newPrebuild(name string) (b *prebuild, ctx context.Context, ok bool) {
	ctx, cancel := context.WithCancel(context.Background())
	b = &prebuild{name: name, done: make(chan struct{}), cancel: cancel}
	if b.dir, b.err = os.MkdirTemp("", prebuildPrefix+strconv.Itoa(os.Getpid())+"-"); b.err != nil {
		close(b.done)
	}
	return b, ctx, b.err == nil
}

// run runs the steps one after another in the background.
func (b *prebuild) run(steps ...func() ([]byte, error)) *prebuild {
	go func() {
		defer close(b.done)
		start := time.Now()
		for _, step := range steps {
			out, err := step()
			b.out = append(b.out, out...)
			if err != nil {
				b.err = err
				break
			}
		}
		b.took = time.Since(start)
	}()
	return b
}

// wait returns once the build is done, failing t if it failed.
func (b *prebuild) wait(t *testing.T) {
	t.Helper()
	if b == nil {
		t.Fatal("TestMain started no build for this test")
	}
	waited := time.Now()
	<-b.done
	if b.err != nil {
		t.Fatalf("%s: %v\n%s", b.name, b.err, b.out)
	}
	t.Logf("%s took %s, started in TestMain; this test waited %s for it", b.name, b.took.Round(time.Second), time.Since(waited).Round(time.Second))
}

func command(ctx context.Context, dir string, name string, args ...string) func() ([]byte, error) {
	return func() ([]byte, error) {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			err = fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
		}
		return out, err
	}
}

// startRelease runs make release for the host's platform into its folder
// (releaseBuild.dir).
func startRelease(root string) *prebuild {
	b, ctx, ok := newPrebuild("make release")
	if !ok {
		return b
	}
	return b.run(command(ctx, root, "make", "release", "VERSION="+releaseVersion, "DIST="+b.dir, "RELEASE_PLATFORMS="+hostPlatform.String()))
}

// startPrevious checks previousCommit out into a worktree (previousWorktree)
// and builds its manager into the project's binaries as previousProgram.
func startPrevious(root string) *prebuild {
	b, ctx, ok := newPrebuild("building the previous manager")
	if !ok {
		return b
	}
	worktree, bin := previousWorktree(b), filepath.Join(root, ".cache", "bin", previousProgram)
	b.cleanup = func() {
		os.Remove(bin)
		_ = exec.Command("git", "-C", root, "worktree", "remove", "--force", worktree).Run()
	}
	fetched := func() ([]byte, error) {
		if exec.Command("git", "-C", root, "cat-file", "-e", previousCommit+"^{commit}").Run() == nil {
			return nil, nil
		}
		// A shallow clone: its origin has the commit.
		return command(ctx, root, "git", "fetch", "--quiet", "origin", previousCommit)()
	}
	return b.run(fetched,
		command(ctx, root, "git", "worktree", "add", "--detach", worktree, previousCommit),
		command(ctx, worktree, "go", "build", "-o", bin, "./cmd/manager"))
}

// previousWorktree is where startPrevious checks previousCommit out.
func previousWorktree(b *prebuild) string { return filepath.Join(b.dir, "previous") }

// previousProgram is the previous manager's name among the project's
// binaries, which the node agent runs for the image of the same name.
var previousProgram = "manager-previous-" + strconv.Itoa(os.Getpid())
