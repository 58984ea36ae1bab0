package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/client"
	"github.com/hotsplit/hotsplit/version"
)

const defaultEndpoint = "127.0.0.1:7001"

// env is what the CLI reads from its surroundings; tests supply their own.
type env struct {
	getenv   func(string) string
	hostname func() (string, error)
}

func osEnv() env { return env{getenv: os.Getenv, hostname: os.Hostname} }

// app holds the global flags and the lazily built client of one run.
type app struct {
	env    env
	out    io.Writer
	errOut io.Writer

	endpoints   string
	consistency string
	output      string
	actor       string
	timeout     time.Duration
	verbose     bool

	// Transport security ($HOTSPLIT_CACERT, $HOTSPLIT_CERT, $HOTSPLIT_KEY,
	// $HOTSPLIT_TOKEN set the defaults).
	caCert, cert, key, token string
	insecure                 bool

	cl *client.Client
}

// run executes one command line and returns the process exit code. Errors
// are printed to stderr as one line.
func run(ctx context.Context, args []string, e env, stdout, stderr io.Writer) int {
	a := &app{env: e, out: stdout, errOut: stderr}
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if a.cl != nil {
		a.cl.Close()
	}
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "hotsplitctl: "+describe(err))
	return exitCode(err)
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "hotsplitctl",
		Short: "Operate a hotsplit cluster: routes, splits and merges, automatic splitting, membership",
		Long: `hotsplitctl talks to a hotsplit cluster over gRPC. Any member will do:
followers forward mutations to the leader, and the client follows leader
hints. Reads are linearizable unless --consistency stale.

Exit codes: 0 success; 1 the cluster refused the request (validation or a
failed precondition; nothing was applied); 2 usage error (nothing was sent);
3 the cluster was unavailable, or a mutation's outcome is unknown (it may have
been applied: the error prints its request id; re-run with --request-id ID to
learn the result); 4 'cluster health' found the cluster degraded; 5 'cluster
health' found no quorum; 6 the connection settings cannot work and retrying
will not help (a certificate expired, not yet valid or refused, the wrong
--cacert, TLS against an --insecure node or the reverse, an --endpoints port
that is no gRPC port): nothing was applied, and the message names the flag or
file to fix.

Each request is retried on another member, or after a short pause, until
--timeout when it failed for want of a leader (a failover in progress) or
was not applied; every attempt is bounded (1 s) so a paused or partitioned
leader is given up quickly. Refusals (permission, validation) and the
failures of exit code 6 are never retried.

Connections are TLS 1.3: --cacert names the cluster's CA, and you prove who
you are with a client certificate (--cert/--key: CN = your name, O = your
roles) or a bearer token (--token). --insecure talks plaintext to a cluster
started with --insecure. 'hotsplitctl certs' makes the certificates.`,
		Example: `  hotsplitctl --endpoints 127.0.0.1:7001,127.0.0.1:7011,127.0.0.1:7021 routes list
  HOTSPLIT_ENDPOINTS=127.0.0.1:7001 hotsplitctl autosplit status -o json
  hotsplitctl cluster health`,
		Version:           version.String(),
		Args:              groupArgs,
		RunE:              groupRun,
		PersistentPreRunE: a.checkGlobalFlags,
		SilenceErrors:     true,
		SilenceUsage:      true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageErr(c, err) })
	root.CompletionOptions.DisableDefaultCmd = true // ours says which shells it supports
	root.SetVersionTemplate("hotsplitctl {{.Version}}\n")

	endpoints := a.env.getenv("HOTSPLIT_ENDPOINTS")
	if endpoints == "" {
		endpoints = defaultEndpoint
	}
	pf := root.PersistentFlags()
	pf.StringVar(&a.endpoints, "endpoints", endpoints, "cluster members to talk to, comma-separated host:port ($HOTSPLIT_ENDPOINTS sets the default)")
	pf.StringVar(&a.consistency, "consistency", "linearizable", "read consistency: linearizable (leader, after a read-index round) or stale (the answering node's state)")
	pf.DurationVar(&a.timeout, "timeout", 5*time.Second, "time limit of each request, retries included")
	pf.StringVarP(&a.output, "output", "o", "table", "output format: table or json (the protobuf JSON mapping of the response)")
	pf.StringVar(&a.actor, "actor", a.defaultActor(), "a note recorded with mutations beside your authenticated identity (the certificate CN or token name is the actor)")
	pf.BoolVarP(&a.verbose, "verbose", "v", false, "log connection attempts and retries to stderr")
	pf.StringVar(&a.caCert, "cacert", a.env.getenv("HOTSPLIT_CACERT"), "the cluster's CA certificate, PEM ($HOTSPLIT_CACERT)")
	pf.StringVar(&a.cert, "cert", a.env.getenv("HOTSPLIT_CERT"), "your client certificate, PEM ($HOTSPLIT_CERT)")
	pf.StringVar(&a.key, "key", a.env.getenv("HOTSPLIT_KEY"), "the key of --cert, PEM ($HOTSPLIT_KEY)")
	pf.StringVar(&a.token, "token", a.env.getenv("HOTSPLIT_TOKEN"), "a bearer token instead of a client certificate ($HOTSPLIT_TOKEN)")
	pf.BoolVar(&a.insecure, "insecure", false, "plaintext, for a cluster started with --insecure (no TLS: anyone on the path can read and change the traffic)")

	root.AddCommand(a.routesCmd(), a.splitCmd(), a.mergeCmd(), a.groupsCmd(), a.moveCmd(), a.movesCmd(), a.autosplitCmd(), a.clusterCmd(), a.snapshotCmd(), a.simCmd(), a.certsCmd(), a.uiCmd(), a.versionCmd(), a.completionCmd())
	return root
}

// flagName is the flag that sets a client setting (its default comes from
// the environment variable its help names).
func flagName(s client.Setting) string {
	switch s {
	case client.SettingCertFile:
		return "--cert"
	case client.SettingCACertFile:
		return "--cacert"
	case client.SettingInsecure:
		return "--insecure"
	case client.SettingEndpoints:
		return "--endpoints"
	}
	return "the TLS settings"
}

func (a *app) defaultActor() string {
	user := a.env.getenv("USER")
	if user == "" {
		user = "unknown"
	}
	if h, err := a.env.hostname(); err == nil && h != "" {
		return user + "@" + h
	}
	return user
}

func (a *app) checkGlobalFlags(cmd *cobra.Command, _ []string) error {
	switch a.output {
	case "table", "json":
	default:
		return usageErrorf(cmd, "-o %q: want table or json", a.output)
	}
	switch a.consistency {
	case "linearizable", "stale":
	default:
		return usageErrorf(cmd, "--consistency %q: want linearizable or stale", a.consistency)
	}
	if a.timeout <= 0 {
		return usageErrorf(cmd, "--timeout %v: want a positive duration such as 5s", a.timeout)
	}
	if strings.TrimSpace(a.actor) == "" {
		return usageErrorf(cmd, "--actor is empty: say who you are (default $USER@hostname)")
	}
	return nil
}

// client returns the run's client, built on first use from the global flags.
func (a *app) client(cmd *cobra.Command) (*client.Client, error) {
	if a.cl != nil {
		return a.cl, nil
	}
	var eps []string
	for i, ep := range strings.Split(a.endpoints, ",") {
		ep = strings.TrimSpace(ep)
		if ep == "" {
			if strings.TrimSpace(a.endpoints) == "" {
				return nil, usageErrorf(cmd, "--endpoints is empty: give host:port[,host:port...] or set $HOTSPLIT_ENDPOINTS")
			}
			return nil, usageErrorf(cmd, "--endpoints %q: entry %d is empty", a.endpoints, i+1)
		}
		if err := client.ValidateEndpoint(ep); err != nil {
			return nil, usageErrorf(cmd, "--endpoints entry %d %q: %v", i+1, ep, err)
		}
		eps = append(eps, ep)
	}
	if err := a.checkSecurityFlags(cmd); err != nil {
		return nil, err
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if a.verbose {
		logger = slog.New(slog.NewTextHandler(a.errOut, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	cl, err := client.New(client.Config{
		Endpoints:      eps,
		DialTimeout:    min(a.timeout, client.DefaultDialTimeout),
		AttemptTimeout: min(a.timeout, client.DefaultAttemptTimeout),
		RequestTimeout: a.timeout,
		// Scaled to the time budget so that a short --timeout still leaves
		// room for every retry.
		Backoff:  max(min(a.timeout/100, client.DefaultBackoff), time.Millisecond),
		Logger:   logger,
		Actor:    a.actor,
		Insecure: a.insecure,
		Token:    a.token,
		// Files only when TLS is on: with --insecure the environment's
		// certificate settings do not apply.
		CACertFile: unless(a.insecure, a.caCert),
		CertFile:   unless(a.insecure, a.cert),
		KeyFile:    unless(a.insecure, a.key),
	})
	if err != nil {
		return nil, usageErr(cmd, err)
	}
	a.cl = cl
	return cl, nil
}

// checkSecurityFlags refuses, before anything is sent, a command line that
// says nothing about TLS or says contradictory things.
func (a *app) checkSecurityFlags(cmd *cobra.Command) error {
	switch {
	case a.insecure && (cmd.Flags().Changed("cacert") || cmd.Flags().Changed("cert") || cmd.Flags().Changed("key")):
		return usageErrorf(cmd, "--insecure together with --cacert/--cert/--key: choose one")
	case a.insecure:
		return nil
	case a.caCert == "":
		return usageErrorf(cmd, "no TLS trust: give --cacert (or $HOTSPLIT_CACERT) with --cert/--key (or --token), or --insecure for a cluster started with --insecure")
	case (a.cert == "") != (a.key == ""):
		return usageErrorf(cmd, "--cert and --key go together ($HOTSPLIT_CERT, $HOTSPLIT_KEY)")
	case a.cert == "" && a.token == "":
		return usageErrorf(cmd, "no identity: give --cert/--key (or $HOTSPLIT_CERT/$HOTSPLIT_KEY) or --token ($HOTSPLIT_TOKEN)")
	}
	return nil
}

func unless(cond bool, s string) string {
	if cond {
		return ""
	}
	return s
}

func (a *app) json() bool { return a.output == "json" }

func (a *app) readConsistency() api.Consistency {
	if a.consistency == "stale" {
		return api.Consistency_CONSISTENCY_STALE
	}
	return api.Consistency_CONSISTENCY_LINEARIZABLE
}

// groupArgs rejects an unknown subcommand of a command that only groups
// others.
func groupArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's own default, set lazily only on its path
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return usageErrorf(cmd, "%s", msg)
}

// groupRun shows the help of a group command run without a subcommand.
func groupRun(cmd *cobra.Command, _ []string) error { return cmd.Help() }

// exactArgs checks the positional arguments against their names.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == len(names) {
			return nil
		}
		want := "no arguments"
		if len(names) > 0 {
			want = strings.Join(names, " ")
		}
		return usageErrorf(cmd, "expects %s, got %d argument(s)", want, len(args))
	}
}

// rangeArgs accepts the first min names and up to len(names) in all.
func rangeArgs(minArgs int, names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) >= minArgs && len(args) <= len(names) {
			return nil
		}
		return usageErrorf(cmd, "expects %s, got %d argument(s)", strings.Join(names, " "), len(args))
	}
}

// parseID reads a positive id, with an optional prefix (r7, op3) as the
// tables print them.
func parseID(cmd *cobra.Command, what, prefix, s string) (uint64, error) {
	v, err := strconv.ParseUint(strings.TrimPrefix(s, prefix), 10, 64)
	if err != nil || v == 0 {
		return 0, usageErrorf(cmd, "%s %q: want a positive integer (e.g. 7 or %s7)", what, s, prefix)
	}
	return v, nil
}

// checkRequestID validates a --request-id given to re-send a mutation.
func checkRequestID(cmd *cobra.Command, id string) error {
	if id == "" {
		return nil
	}
	if len(id) > 128 {
		return usageErrorf(cmd, "--request-id is %d characters; at most 128", len(id))
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] >= 0x7f {
			return usageErrorf(cmd, "--request-id %q: byte %d is not printable ASCII", id, i)
		}
	}
	return nil
}

const requestIDHelp = "re-send a mutation under this request id (printed by an earlier unknown-outcome error) to learn its result instead of applying it twice"

// expectedVersion is --expected-version as a request carries it: nil when
// the flag is not given (the mutation is unconditional).
func expectedVersion(cmd *cobra.Command, v uint64) (*uint64, error) {
	if !cmd.Flags().Changed("expected-version") {
		return nil, nil
	}
	if v == 0 {
		return nil, usageErrorf(cmd, "--expected-version 0: catalog versions start at 1")
	}
	return &v, nil
}
