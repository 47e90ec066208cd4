// The cert-manager webhook (its admission chain: Certificate, Issuer, CertificateRequest
// validation and defaulting), started from cert-manager's own packages with serving files and a
// kubeconfig given as flags, for kcp's end-to-end tests. cert-manager publishes its cmd/webhook
// module nowhere the test tooling can fetch it; this module's path lies under cert-manager's so
// that it may use the same internal packages cmd/webhook does. Nothing here changes what the
// webhook admits.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	config "github.com/cert-manager/cert-manager/internal/apis/config/webhook"
	"github.com/cert-manager/cert-manager/internal/webhook"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
)

func main() {
	port := flag.Int("secure-port", 0, "the port the webhook serves HTTPS on")
	certFile := flag.String("tls-cert-file", "", "the serving certificate")
	keyFile := flag.String("tls-private-key-file", "", "the serving key")
	kubeconfig := flag.String("api-kubeconfig", "", "the kubeconfig of the API server (controller-runtime holds --kubeconfig)")
	flag.Parse()

	var opts config.WebhookConfiguration
	opts.SecurePort = int32(*port)
	opts.KubeConfig = *kubeconfig
	opts.TLSConfig.Filesystem.CertFile = *certFile
	opts.TLSConfig.Filesystem.KeyFile = *keyFile
	opts.MetricsListenAddress = "0"

	server, err := webhook.NewCertManagerWebhookServer(logf.Log, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := server.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
