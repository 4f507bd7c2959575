package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// TestDashboard drives kubectl rainbow dashboard (make bins) in headless
// Chromium (make chromium): the page shows v1 current, then a Progressive
// rollout's ramp change without a reload; its promote button ends the step
// in the API server and on the page; a POST without the page's token or
// from another origin changes nothing; and the dashboard of a user who may
// only view, run with that user's own token, shows the API server's
// refusal of a pause.
func TestDashboard(t *testing.T) {
	parallel(t)
	chromium := ""
	for _, name := range []string{"chromium-headless-shell", "chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			chromium = p
			break
		}
	}
	if chromium == "" {
		t.Fatal("no chromium-headless-shell or chromium on PATH: install it with make chromium")
	}
	tt := env.NewTest(t)
	r := newRollout(tt, "dash")
	twd := r.Spec("v1")
	twd.Spec.Rollout = v1alpha1.RolloutSpec{Strategy: v1alpha1.StrategyProgressive, Steps: steps([]int32{25, 75}, time.Hour)}
	v1 := r.Create(twd)

	url, key := startDashboard(t, env.Info.Kubeconfig, tt.Namespace)
	shots := filepath.Join(env.Root, ".cache", "screenshots")
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	alloc, stopAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.WindowSize(1280, 1100))...)
	defer stopAlloc()
	browser, stopBrowser := chromedp.NewContext(alloc, chromedp.WithLogf(t.Logf))
	defer stopBrowser()
	// The first run starts the browser, which lives as long as its
	// context: no timeout on that one.
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("start %s: %v", chromium, err)
	}
	// run runs browser actions within a generous bound.
	run := func(what string, timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, timeout)
		defer cancel()
		if err := chromedp.Do(ctx, actions...); err != nil {
			hctx, hcancel := context.WithTimeout(browser, 10*time.Second)
			defer hcancel()
			html, _ := chromedp.Run(hctx, chromedp.OuterHTML(chromedp.CSS("#live")))
			t.Fatalf("%s: %v\nTWD: %s\npage:\n%s", what, err, describe(r.Get()), html)
		}
	}
	// waitPage waits until a JavaScript condition holds on the page.
	waitPage := func(what, js string) {
		t.Helper()
		run("the page shows "+what, 3*time.Minute, discard(chromedp.Poll[bool](js, chromedp.WithPollingInterval(250*time.Millisecond), chromedp.WithPollingTimeout(3*time.Minute))))
	}
	row := func(build, attrs string) string {
		return fmt.Sprintf(`document.querySelector('tr[data-build="%s"]%s') !== null`, build, attrs)
	}
	screenshot := func(name string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, 30*time.Second)
		defer cancel()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// press clicks an element once it is there (and enabled), in one step
	// in the page: the stream may replace the live part at any moment.
	press := func(what, selector string) {
		t.Helper()
		waitPage(what+" pressed", `(() => { const e = document.querySelector('`+selector+`');
			if (e === null || e.disabled) return false; e.click(); return true; })()`)
	}

	// (1) the list, then the TWD's page; (2) v1 current there.
	run("load the list", time.Minute, chromedp.Navigate(url+"?key="+key))
	press("the TWD's link", `tr[data-twd="`+tt.Namespace+`/dash"] a`)
	run("load the TWD's page", time.Minute, chromedp.WaitVisible(chromedp.CSS(`body.twd #ready`)),
		// Gone if the page reloads.
		discard(chromedp.Evaluate[bool](`window.loadedOnce = true`)))
	waitPage(v1+" current", row(v1, `[data-role="target"][data-status="Current"]`))
	r.WaitCurrent(3*time.Minute, v1)

	// (3) a rollout: the ramp changes on the page, no reload.
	v2 := r.SetImage("v2")
	waitPage(v2+" ramping at 25%", row(v2, `[data-status="Ramping"][data-ramp="25%"]`)+
		` && document.querySelector('li[data-build="`+v2+`"][data-percent="25"]') !== null`)
	r.waitFor(time.Minute, v2+" ramping 25%", func(tw *v1alpha1.TemporalWorkerDeployment) bool { return rampsAt(tw, v2, 25) })

	// (4) promote: the step ends in the API server and on the page.
	press("promote", `button[data-verb="promote"]`)
	waitPage("promote's answer", `document.querySelector('#result.ok[data-verb="promote"]') !== null`)
	r.waitFor(2*time.Minute, v2+" ramping 75% after promote", func(tw *v1alpha1.TemporalWorkerDeployment) bool { return rampsAt(tw, v2, 75) })
	waitPage(v2+" ramping at 75% after 25%", row(v2, `[data-status="Ramping"][data-ramp="75%"]`)+
		` && document.querySelector('li[data-build="`+v2+`"][data-percent="25"] ~ li[data-build="`+v2+`"][data-percent="75"]') !== null`+
		` && window.loadedOnce === true`)
	screenshot("dashboard.png")

	// (5a) Requests other than the page's own are refused and change nothing.
	tctx, tcancel := context.WithTimeout(browser, 30*time.Second)
	attr, err := chromedp.Run(tctx, chromedp.AttributeValue(chromedp.CSS(`meta[name="rainbow-token"]`), "content"))
	tcancel()
	if err != nil || attr.Value == "" {
		t.Fatalf("the page's token: %v", err)
	}
	token := attr.Value
	cookie := "rainbow-dashboard-" + url[strings.LastIndex(url, ":")+1:len(url)-1]
	request := func(method, path, origin, cookieValue, tok string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if cookieValue != "" {
			req.AddCookie(&http.Cookie{Name: cookie, Value: cookieValue})
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if tok != "" {
			req.Header.Set("X-Rainbow-Token", tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	origin := strings.TrimSuffix(url, "/")
	pause := "act/" + tt.Namespace + "/dash/pause"
	for _, c := range []struct {
		what, method, path, origin, cookie, token string
		code                                      int
	}{
		{"a POST without the token", http.MethodPost, pause, origin, key, "", http.StatusForbidden},
		{"a POST from another site", http.MethodPost, pause, "https://attacker.test", key, token, http.StatusForbidden},
		{"a GET", http.MethodGet, pause, origin, key, token, http.StatusMethodNotAllowed},
		// Another user of this machine reaches the port, but has no key.
		{"a POST without the key's cookie", http.MethodPost, pause, origin, "", token, http.StatusUnauthorized},
		{"the page without the key's cookie", http.MethodGet, "twd/" + tt.Namespace + "/dash", "", "", "", http.StatusUnauthorized},
	} {
		if code, body := request(c.method, c.path, c.origin, c.cookie, c.token); code != c.code {
			t.Fatalf("%s: %d %s, want %d", c.what, code, body, c.code)
		}
	}
	if r.Get().Spec.Rollout.Paused {
		t.Fatal("a refused request paused the rollout")
	}

	// (5b) A user who may only view, with a token of their own: the
	// dashboard reads as that user, and the pause it sends is refused by
	// the API server, whose message the page shows.
	viewer := "dash-viewer"
	if err := env.Kube.Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: tt.Namespace, Name: viewer}}); err != nil {
		t.Fatal(err)
	}
	user := "system:serviceaccount:" + tt.Namespace + ":" + viewer
	if err := env.Kube.Create(context.Background(), harness.UserBinding(tt.Namespace, "dash-viewer", "ClusterRole", "view", user)); err != nil {
		t.Fatal(err)
	}
	tt.CheckAccess(user, []harness.Access{
		harness.Allow("watch", "temporal.io/temporalworkerdeployments", tt.Namespace, ""),
		harness.Deny("patch", "temporal.io/temporalworkerdeployments", tt.Namespace, "dash"),
	})
	viewerURL, viewerKey := startDashboard(t, tokenKubeconfig(t, tt.Namespace, viewer), tt.Namespace)
	run("the viewer's dashboard", time.Minute, chromedp.Navigate(viewerURL+"twd/"+tt.Namespace+"/dash?key="+viewerKey))
	press("pause", `button[data-verb="pause"]`)
	waitPage("the API server's refusal", `(() => { const r = document.querySelector('#result.error[data-verb="pause"]');
		return r !== null && r.textContent.includes('forbidden') && r.textContent.includes('User "`+user+`" cannot patch'); })()`)
	screenshot("dashboard-forbidden.png")
	if r.Get().Spec.Rollout.Paused {
		t.Fatal("the viewer's pause went through")
	}
}

// startDashboard runs kubectl-rainbow dashboard with kubeconfig in
// namespace and returns the address it prints (http://127.0.0.1:PORT/) and
// its key.
func startDashboard(t *testing.T, kubeconfig, namespace string) (url, key string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(env.BinDir, "kubectl-rainbow"), "--kubeconfig", kubeconfig, "-n", namespace, "dashboard", "--open=false")
	cmd.Env = append(os.Environ(), "KUBECONFIG=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var errs syncBuffer
	cmd.Stderr = &errs
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%v: build it with make bins", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		t.Logf("dashboard (%s) stderr:\n%s", kubeconfig, errs.String())
	})
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if _, u, ok := strings.Cut(sc.Text(), "Rainbow dashboard: "); ok {
				urls <- strings.Fields(u)[0]
			}
		}
		close(urls)
	}()
	select {
	case u, ok := <-urls:
		url, key, found := strings.Cut(u, "?key=")
		if !ok || !found {
			t.Fatalf("the dashboard stopped before serving, or printed no key (%q):\n%s", u, errs.String())
		}
		return url, key
	case <-time.After(2 * time.Minute):
		t.Fatalf("the dashboard printed no address within 2 minutes:\n%s", errs.String())
	}
	return "", ""
}

// tokenKubeconfig is the environment's kubeconfig with a token of service
// account sa instead of the administrator's credentials.
func tokenKubeconfig(t *testing.T, namespace, sa string) string {
	t.Helper()
	req, err := env.Clients.CoreV1().ServiceAccounts(namespace).CreateToken(context.Background(), sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.LoadFromFile(env.Info.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for name := range kc.AuthInfos {
		kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: req.Status.Token}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// discard makes an action that returns a value one of a sequence.
func discard[T any](a chromedp.Action[T]) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := a(ctx, t)
		return chromedp.Void{}, err
	}
}
