package dashboard

import (
	"fmt"
	"html"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// NewCommand is kubectl rainbow dashboard, on the plugin's kubeconfig flags.
func NewCommand(flags *genericclioptions.ConfigFlags) *cobra.Command {
	var address string
	var open, all bool
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Serve a live web page of the TemporalWorkerDeployments, with the actions as buttons",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := flags.ToRESTConfig()
			if err != nil {
				return err
			}
			ns := ""
			if !all {
				if ns, _, err = flags.ToRawKubeConfigLoader().Namespace(); err != nil {
					return err
				}
			}
			s, err := New(cmd.Context(), cfg, ns)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", address)
			if err != nil {
				return err
			}
			if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s is not a loopback address: whoever reaches it sees what your kubeconfig may read\n", ln.Addr())
			}
			key := NewKey()
			url := SignInURL(ln, key)
			fmt.Fprintf(cmd.OutOrStdout(), "Rainbow dashboard: %s (Ctrl-C stops it)\n", url)
			if open {
				dir, err := openBrowser(url)
				if err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "could not open a browser (%v): open the address above yourself\n", err)
				}
				defer os.RemoveAll(dir)
			}
			return s.Serve(cmd.Context(), ln, key)
		},
	}
	cmd.Flags().StringVar(&address, "address", "127.0.0.1:0", "address to listen on (port 0 picks a free one)")
	cmd.Flags().BoolVar(&open, "open", true, "open the page in the default browser")
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "every namespace, not only the kubeconfig's")
	return cmd
}

// openBrowser opens a file of the user's own that sends the browser on to
// url: the key stays out of command lines, which other users can read.
func openBrowser(url string) (dir string, err error) {
	dir, err = os.MkdirTemp("", "rainbow-dashboard-")
	if err != nil {
		return "", err
	}
	page := filepath.Join(dir, "open.html")
	redirect := `<!doctype html><meta http-equiv="refresh" content="0;url=` + html.EscapeString(url) + `">`
	if err := os.WriteFile(page, []byte(redirect), 0o600); err != nil {
		return dir, err
	}
	name, args := "xdg-open", []string{page}
	switch runtime.GOOS {
	case "darwin":
		name = "open"
	case "windows":
		name, args = "rundll32", []string{"url.dll,FileProtocolHandler", page}
	}
	return dir, exec.Command(name, args...).Start()
}
