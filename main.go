// Command rolodex is a JSON HTTP API for customer-relationship data (contacts and business records)
// kept in PostgreSQL and scoped to the company that owns each API key.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
)

// version is stamped at build time with -ldflags "-X main.version=v1.2.3".
var version = ""

const usage = `rolodex: a CRM API server for contacts and business records.

Usage:
  rolodex serve   [flags]                     run the API server (migrates at start)
  rolodex migrate [flags]                     apply the database schema
  rolodex company create -name NAME           create a company, its first user and an API key
  rolodex key create -company ID [-user ID]   create an API key (-scopes a,b, -expires 720h)
  rolodex key list -company ID                list a company's API keys
  rolodex key revoke KEY_PREFIX               revoke an API key by its prefix
  rolodex dev     [-addr ADDR] [-dir DIR]     a local PostgreSQL, demo data, the server on 127.0.0.1:8080
  rolodex version                             print the version

Run "rolodex COMMAND -h" for a command's flags. DATABASE_URL, ROLODEX_ADDR and the other
ROLODEX_* variables named there set the same options as the flags; a flag wins over its variable.
`

// errUsage ends a command line that cannot run: main exits 2, after printing the message it is
// wrapped in, if any.
var errUsage = errors.New("usage")

func main() {
	// Collect garbage as the heap nears 64 MiB rather than whenever it doubles, unless GOGC or
	// GOMEMLIMIT says otherwise: a request leaves almost nothing behind, so with Go's default the
	// server collected dozens of times a second under load. `make bench` against Go's default (20,000
	// contacts, wrk -c32, 3 paired rounds): list100 1.47x, list100+5 1.50x, retrieve 1.14x,
	// retrieve+5 1.07x.
	if os.Getenv("GOGC") == "" && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetGCPercent(-1)
		debug.SetMemoryLimit(64 << 20)
	}
	err := run(context.Background(), os.Args, os.Getenv, os.Stdout, os.Stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		if msg, ok := strings.CutSuffix(err.Error(), ": "+errUsage.Error()); ok {
			fmt.Fprintln(os.Stderr, "rolodex:", msg)
		}
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "rolodex:", err)
		os.Exit(1)
	}
}

// run is the whole program: it parses args (args[0] is the program name), reads configuration through
// getenv, and returns when the command is done or ctx is cancelled (or SIGINT/SIGTERM arrive).
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(args) < 2 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	commands := map[string]func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error{
		"serve":          cmdServe,
		"migrate":        cmdMigrate,
		"dev":            cmdDev,
		"company create": cmdCompanyCreate,
		"key create":     cmdKeyCreate,
		"key list":       cmdKeyList,
		"key revoke":     cmdKeyRevoke,
	}
	cmd, rest := args[1], args[2:]
	if len(rest) > 0 && commands[cmd+" "+rest[0]] != nil {
		cmd, rest = cmd+" "+rest[0], rest[1:]
	}
	if command, ok := commands[cmd]; ok {
		return command(ctx, rest, getenv, stdout, stderr)
	}
	switch cmd {
	case "version":
		fmt.Fprintln(stdout, "rolodex", buildVersion())
		return nil
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprintf(stderr, "rolodex: unknown command %q\n\n%s", strings.Join(args[1:min(3, len(args))], " "), usage)
	return errUsage
}

// buildVersion is the stamped version, else the module version Go recorded, else "devel".
func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// newFlags makes a flag set for a subcommand whose -h prints synopsis and the flags to stderr.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: rolodex %s\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// envVars are the variables that set flags, in the order of the flags' names: each sets the flag
// its words after ROLODEX_ name, in lower case joined by "-" (ROLODEX_RATE_LIMIT: -rate-limit).
var envVars = []string{"ROLODEX_ADDR", "ROLODEX_AUTH_FAILURE_LIMIT", "DATABASE_URL", "ROLODEX_DB_MAX_CONNS",
	"ROLODEX_EVENT_RETENTION", "ROLODEX_METRICS_ADDR", "ROLODEX_RATE_LIMIT", "ROLODEX_SHUTDOWN_TIMEOUT",
	"ROLODEX_STATEMENT_TIMEOUT", "ROLODEX_TRUSTED_PROXIES", "ROLODEX_WEBHOOK_ALLOW_CIDRS",
	"ROLODEX_WEBHOOK_BACKOFF", "ROLODEX_WEBHOOK_SLOTS"}

// parseFlags sets each flag of fs that has a variable from it, then parses args, so a flag wins over
// its variable and a bad value in either is an error. It rejects positional arguments beyond want.
func parseFlags(fs *flag.FlagSet, getenv func(string) string, args []string, want int) error {
	for _, env := range envVars {
		name := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(env, "ROLODEX_"), "_", "-"))
		f := fs.Lookup(name)
		if f == nil {
			continue
		}
		f.Usage += " (env " + env + ")"
		if v := getenv(env); v != "" {
			if err := f.Value.Set(v); err != nil {
				return fmt.Errorf("invalid value %q for %s (-%s): %w", v, env, name, err)
			}
		}
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != want {
		fs.Usage()
		return errUsage
	}
	return nil
}

// withStore ends a command that works on the database: it adds the database flags to fs, parses args
// (want positional arguments), opens the store and runs do with it.
func withStore(fs *flag.FlagSet, getenv func(string) string, args []string, want int, do func(st *store) error) error {
	var cfg dbConfig
	fs.StringVar(&cfg.url, "database-url", "", "PostgreSQL URL")
	fs.IntVar(&cfg.maxConns, "db-max-conns", 16, "connection pool size")
	fs.DurationVar(&cfg.statementTimeout, "statement-timeout", 10*time.Second, "per-statement limit in PostgreSQL")
	if err := parseFlags(fs, getenv, args, want); err != nil {
		return err
	}
	if cfg.url == "" {
		return errors.New("no database: set DATABASE_URL or -database-url (or try `rolodex dev`)")
	}
	st, err := openStore(cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	return do(st)
}

// limits are what newHandler holds each request to.
type limits struct {
	rate           int            // requests a second per API key, in bursts of twice that; 0: unlimited
	authFailures   int            // failed authentications a minute per client address; 0: unlimited
	trustedProxies []netip.Prefix // peers whose X-Forwarded-For names the client
	requestTimeout time.Duration  // bound on a request's database work; 0: none
	eventRetention time.Duration  // how long events are kept
	hooks          webhookSettings
	metricsAddr    string   // where GET /metrics is served (metrics.go); "": nowhere
	metrics        *metrics // what requests update; nil without metricsAddr
}

// serverFlags are the flags serve and dev share: where to listen, and the limits with their defaults.
type serverFlags struct {
	addr      string // -addr
	proxies   string // -trusted-proxies, parsed into lim by limits
	hookCIDRs string // -webhook-allow-cidrs, parsed into lim by limits
	lim       limits
}

// addServerFlags adds the flags of serverFlags to fs, -addr with the default addr.
func addServerFlags(fs *flag.FlagSet, addr string) *serverFlags {
	f := &serverFlags{}
	fs.StringVar(&f.addr, "addr", addr, "listen address")
	fs.StringVar(&f.lim.metricsAddr, "metrics-addr", "", "listen address of GET /metrics (Prometheus), e.g. 127.0.0.1:9090; off by default")
	fs.IntVar(&f.lim.rate, "rate-limit", defaultRateLimit, "requests a second per API key, in bursts of twice that; 0: off")
	fs.IntVar(&f.lim.authFailures, "auth-failure-limit", defaultAuthFailureLimit, "failed authentications a minute per client address; 0: off")
	fs.DurationVar(&f.lim.eventRetention, "event-retention", 30*24*time.Hour, "how long events are kept")
	fs.StringVar(&f.proxies, "trusted-proxies", "", "comma-separated CIDRs of proxies whose X-Forwarded-For names the client; none by default")
	fs.DurationVar(&f.lim.hooks.backoff, "webhook-backoff", defaultWebhookBackoff, "wait before a failed webhook delivery is sent again, doubling each time up to 6h")
	fs.StringVar(&f.hookCIDRs, "webhook-allow-cidrs", "", "comma-separated CIDRs webhooks may go to besides public addresses, e.g. 127.0.0.1/32; none by default (dev: 127.0.0.1/32)")
	fs.IntVar(&f.lim.hooks.slots, "webhook-slots", defaultWebhookSlots, "webhook deliveries this server sends at once, at most 4 to one endpoint; 0: it sends none")
	return f
}

// limits returns the limits the parsed flags set; a bad value is a usage error.
func (f *serverFlags) limits() (limits, error) {
	lim := f.lim
	if lim.rate < 0 || lim.authFailures < 0 || lim.hooks.slots < 0 || lim.eventRetention <= 0 || lim.hooks.backoff <= 0 {
		return lim, fmt.Errorf("-rate-limit, -auth-failure-limit and -webhook-slots must be 0 or more, -event-retention and -webhook-backoff more than 0: %w", errUsage)
	}
	proxies, err := parseCIDRs("-trusted-proxies", f.proxies)
	if err != nil {
		return lim, err
	}
	lim.trustedProxies = proxies
	lim.hooks.allow, err = parseCIDRs("-webhook-allow-cidrs", f.hookCIDRs)
	return lim, err
}

// cmdServe is `rolodex serve`: the API server, until ctx is done.
func cmdServe(ctx context.Context, args []string, getenv func(string) string, _, stderr io.Writer) error {
	fs := newFlags("serve", "serve [flags]", stderr)
	server := addServerFlags(fs, ":8080")
	shutdown := fs.Duration("shutdown-timeout", 15*time.Second, "how long requests in flight may take at shutdown")
	return withStore(fs, getenv, args, 0, func(st *store) error {
		lim, err := server.limits()
		if err != nil {
			return err
		}
		return serve(ctx, st, server.addr, *shutdown, lim, slog.New(slog.NewJSONHandler(stderr, nil)), nil)
	})
}

// parseCIDRs reads the comma-separated CIDRs s of the setting name; one that is not is a usage error.
func parseCIDRs(name, s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, c := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a CIDR such as 10.0.0.0/8: %w", name, c, errUsage)
		}
		out = append(out, p)
	}
	return out, nil
}

// serve migrates the database (waiting for it to come up), listens on addr, deletes what is past its
// retention and sends webhooks until ctx is done, then lets requests in flight finish within shutdown.
// ready, when not nil, is called with the listening address.
func serve(ctx context.Context, st *store, addr string, shutdown time.Duration, lim limits, log *slog.Logger, ready func(addr string)) error {
	if err := waitAndMigrate(ctx, st, log); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	lim.requestTimeout = st.statementTimeout // a request's queries together get as long as one statement
	if err := startMetrics(ctx, st, &lim, log); err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           newHandler(st, log, lim),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	go deleteInBatches(ctx, log, "expired idempotency keys", idempotencyExpiration, st.deleteExpiredKeys)
	go deleteInBatches(ctx, log, "old events", min(lim.eventRetention/10, time.Hour), func(ctx context.Context) (int64, error) {
		return st.deleteOldEvents(ctx, lim.eventRetention)
	})
	go deleteInBatches(ctx, log, "values of deleted custom fields", time.Minute, st.purgeCustomValues)
	hooks := make(chan struct{})
	go func() {
		runWebhooks(ctx, st, lim.hooks, log)
		close(hooks)
	}()
	log.Info("listening", "addr", ln.Addr().String(), "version", buildVersion())
	if ready != nil {
		ready(ln.Addr().String())
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdown)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	<-hooks // sends in flight were cancelled with ctx
	log.Info("stopped")
	return nil
}

// waitAndMigrate migrates, retrying with backoff while the database is unreachable, so a server
// started before its database comes up by itself when the database does.
func waitAndMigrate(ctx context.Context, st *store, log *slog.Logger) error {
	delay := 250 * time.Millisecond
	for {
		applied, err := st.migrate(ctx)
		if err == nil && len(applied) > 0 {
			log.Info("migrated", "versions", applied)
		}
		if err == nil || !isDBUnavailable(err) || ctx.Err() != nil {
			return err
		}
		log.Warn("database not reachable, retrying", "in", delay, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// newHandler is the whole HTTP stack: the routes inside the middleware, composed here and only
// here. Outermost first: request id, deadline, access log and recovery; the query-string bound;
// authentication (with its failure limit); the per-key rate limit; the routes.
func newHandler(st *store, log *slog.Logger, lim limits) http.Handler {
	mux := http.NewServeMux()
	auth := newAuthenticator(st)
	addRoutes(mux, st, auth, lim, log)
	h := withRateLimit(newRateLimiter(lim.rate), withPattern(mux))
	h = withAuth(auth, lim.metrics.limiter(newFailureLimiter(lim.authFailures)), lim.trustedProxies, log, h)
	h = withQueryLimit(h)
	return withRequestLog(log, newRequestIDs(), lim.requestTimeout, lim.metrics.wrap(h))
}

// addRoutes lists every endpoint of the server; api/openapi.json describes each of them. Every /v1
// route names the scope its key needs (withScope, auth.go; the scopes are keys.go's).
func addRoutes(mux *http.ServeMux, st *store, auth *authenticator, lim limits, log *slog.Logger) {
	mux.Handle("GET /healthz", handleHealthz())
	mux.Handle("GET /readyz", handleReadyz(st, log))
	mux.Handle("GET /v1/openapi.json", handleCustomOpenAPI(st, log))
	v1 := func(pattern, scope string, h http.Handler) {
		if scope != "" { // "": the handler checks the scopes of what its request names
			h = withScope(scope, h)
		}
		for p, h := range routesOf(pattern, h) {
			mux.Handle(p, h)
		}
	}

	v1("GET /v1/contacts", "contacts:read", handleList[contact](st, contacts, log))
	v1("GET /v1/contacts/count", "contacts:read", handleCount(st, contacts, log))
	v1("GET /v1/contacts/summary", "contacts:read", handleSummary(st, contacts, log))
	v1("GET /v1/contacts/{id}", "contacts:read", handleGet[contact](st, contacts, log))
	v1("POST /v1/contacts", "contacts:write", handleCreate(st, contacts, createContact, log))
	v1("PATCH /v1/contacts/{id}", "contacts:write", handleUpdate(st, contacts, updateContact, log))
	v1("DELETE /v1/contacts/{id}", "contacts:write", handleDelete[contact](st, contacts, log))
	v1("POST /v1/contacts/{id}/merge", "contacts:write", handleMerge(st, contacts, updateContact, log))

	v1("GET /v1/business", "business:read", handleList[business](st, businesses, log))
	v1("GET /v1/business/count", "business:read", handleCount(st, businesses, log))
	v1("GET /v1/business/summary", "business:read", handleSummary(st, businesses, log))
	v1("GET /v1/business/{id}", "business:read", handleGet[business](st, businesses, log))
	v1("POST /v1/business", "business:write", handleCreate(st, businesses, createBusiness, log))
	v1("PATCH /v1/business/{id}", "business:write", handleUpdate(st, businesses, updateBusiness, log))
	v1("DELETE /v1/business/{id}", "business:write", handleDelete[business](st, businesses, log))

	v1("GET /v1/organizations", "organizations:read", handleList[organization](st, organizations, log))
	v1("GET /v1/organizations/summary", "organizations:read", handleSummary(st, organizations, log))
	v1("GET /v1/organizations/{id}", "organizations:read", handleGet[organization](st, organizations, log))
	v1("POST /v1/organizations", "organizations:write", handleCreate(st, organizations, createOrganization, log))
	v1("PATCH /v1/organizations/{id}", "organizations:write", handleUpdate(st, organizations, updateOrganization, log))
	v1("DELETE /v1/organizations/{id}", "organizations:write", handleDelete[organization](st, organizations, log))
	v1("POST /v1/organizations/{id}/merge", "organizations:write", handleMerge(st, organizations, updateOrganization, log))
	v1("POST /v1/contacts/batch/{op}", "contacts:write", handleBatch(st, contacts, contactBatch, log))
	v1("POST /v1/business/batch/{op}", "business:write", handleBatch(st, businesses, businessBatch, log))
	v1("POST /v1/organizations/batch/{op}", "organizations:write", handleBatch(st, organizations, organizationBatch, log))
	addActivityRoutes(v1, st, log)
	v1("GET /v1/contacts/{id}/timeline", "contacts:read", handleTimeline(st, contactKind, log))
	v1("GET /v1/business/{id}/timeline", "business:read", handleTimeline(st, businessKind, log))
	v1("GET /v1/organizations/{id}/timeline", "organizations:read", handleTimeline(st, organizationKind, log))
	addAssociationRoutes(v1, st, log)
	v1("GET /v1/search", "", handleSearch(st, log)) // each kind's read scope, of those it searches
	v1("GET /v1/search/count", "", handleSearchCount(st, log))

	v1("GET /v1/users", "reference:read", handleList[user](st, users, log))
	v1("GET /v1/users/{id}", "reference:read", handleGet[user](st, users, log))
	v1("GET /v1/stages", "reference:read", handleList[stage](st, stages, log))
	v1("GET /v1/stages/{id}", "reference:read", handleGet[stage](st, stages, log))
	v1("GET /v1/boards", "reference:read", handleList[board](st, boards, log))
	v1("GET /v1/boards/{id}", "reference:read", handleGet[board](st, boards, log))
	v1("GET /v1/statuses", "reference:read", handleList[status](st, statuses, log))
	v1("GET /v1/currencies", "reference:read", handleList[currency](st, currencies, log))
	v1("GET /v1/countries", "reference:read", handleList[country](st, countries, log))

	addPlatformRoutes(v1, st, auth, lim, log)

	mux.Handle("/", handleNoRoute(mux))
}

// addPlatformRoutes adds the routes of what serves integrations rather than a kind of CRM object:
// custom fields, the events feed, API keys and webhooks (addRoutes's v1).
func addPlatformRoutes(v1 func(pattern, scope string, h http.Handler), st *store, auth *authenticator, lim limits, log *slog.Logger) {
	v1("GET /v1/customFields", "customFields:read", handleList[customField](st, customFields, log))
	v1("GET /v1/customFields/{id}", "customFields:read", handleGet[customField](st, customFields, log))
	v1("POST /v1/customFields", "customFields:write", handleCreate(st, customFields, createCustomField, log))
	v1("PATCH /v1/customFields/{id}", "customFields:write", handleUpdate(st, customFields, updateCustomField, log))
	v1("DELETE /v1/customFields/{id}", "customFields:write", handleCustomFieldDelete(st, log))

	v1("GET /v1/events", "events:read", handleEvents(st, lim.eventRetention, log))
	v1("GET /v1/events/{id}", "events:read", handleEventGet(st, log))

	v1("GET /v1/apiKeys", "keys:read", handleList[apiKey](st, apiKeys, log))
	v1("GET /v1/apiKeys/{id}", "keys:read", handleGet[apiKey](st, apiKeys, log))
	v1("POST /v1/apiKeys", "keys:write", handleKeyCreate(st, log))
	v1("POST /v1/apiKeys/{id}/roll", "keys:write", handleKeyRoll(st, auth, log))
	v1("DELETE /v1/apiKeys/{id}", "keys:write", handleKeyRevoke(st, auth, log))

	v1("GET /v1/webhooks", "webhooks:read", handleList[webhookEndpoint](st, webhooks, log))
	v1("GET /v1/webhooks/{id}", "webhooks:read", handleGet[webhookEndpoint](st, webhooks, log))
	v1("POST /v1/webhooks", "webhooks:write", handleWebhookCreate(st, lim.hooks.allow, log))
	v1("PATCH /v1/webhooks/{id}", "webhooks:write", handleWebhookUpdate(st, lim.hooks.allow, log))
	v1("DELETE /v1/webhooks/{id}", "webhooks:write", handleDelete[webhookEndpoint](st, webhooks, log))
	v1("GET /v1/webhooks/{id}/deliveries", "webhooks:read", handleList[delivery](st, deliveries, log))
	v1("POST /v1/webhooks/{id}/deliveries/{deliveryId}/retry", "webhooks:write", handleWebhookRetry(st, log))
	v1("POST /v1/webhooks/{id}/rotateSecret", "webhooks:write", handleWebhookRotate(st, log))
}

// addActivityRoutes adds the routes of activities (activities.go) with v1, addRoutes's. A write
// that names targets needs read on their kinds too (checkActivity).
func addActivityRoutes(v1 func(pattern, scope string, h http.Handler), st *store, log *slog.Logger) {
	v1("GET /v1/activities", "activities:read", handleList[activity](st, activities, log))
	v1("GET /v1/activities/count", "activities:read", handleCount(st, activities, log))
	v1("GET /v1/activities/summary", "activities:read", handleSummary(st, activities, log))
	v1("GET /v1/activities/{id}", "activities:read", handleGet[activity](st, activities, log))
	v1("POST /v1/activities", "activities:write", handleCreate(st, activities, createActivity, log))
	v1("PATCH /v1/activities/{id}", "activities:write", handleUpdate(st, activities, updateActivity, log))
	v1("DELETE /v1/activities/{id}", "activities:write", handleDelete[activity](st, activities, log))
	v1("POST /v1/activities/batch/{op}", "activities:write", handleBatch(st, activities, activityBatch, log))
}

// addAssociationRoutes adds the routes of associations (associations.go) with v1, addRoutes's: a
// read names the scope of its path's kind, its handler the other kind's; a write's handler checks
// both (associationScopeError: an activity's target needs only read), a batch's items theirs
// (batchScopeError).
func addAssociationRoutes(v1 func(pattern, scope string, h http.Handler), st *store, log *slog.Logger) {
	v1("GET /v1/contacts/{id}/associations/{toKind}", "contacts:read", handleAssociationList(st, contactKind, log))
	v1("GET /v1/contacts/{id}/associations/{toKind}/count", "contacts:read", handleAssociationCount(st, contactKind, log))
	v1("PUT /v1/contacts/{id}/associations/{toKind}/{toId}", "", handleAssociationPut(st, contactKind, log))
	v1("DELETE /v1/contacts/{id}/associations/{toKind}/{toId}", "", handleAssociationDelete(st, contactKind, log))
	v1("GET /v1/business/{id}/associations/{toKind}", "business:read", handleAssociationList(st, businessKind, log))
	v1("GET /v1/business/{id}/associations/{toKind}/count", "business:read", handleAssociationCount(st, businessKind, log))
	v1("PUT /v1/business/{id}/associations/{toKind}/{toId}", "", handleAssociationPut(st, businessKind, log))
	v1("DELETE /v1/business/{id}/associations/{toKind}/{toId}", "", handleAssociationDelete(st, businessKind, log))
	v1("GET /v1/organizations/{id}/associations/{toKind}", "organizations:read", handleAssociationList(st, organizationKind, log))
	v1("GET /v1/organizations/{id}/associations/{toKind}/count", "organizations:read", handleAssociationCount(st, organizationKind, log))
	v1("PUT /v1/organizations/{id}/associations/{toKind}/{toId}", "", handleAssociationPut(st, organizationKind, log))
	v1("DELETE /v1/organizations/{id}/associations/{toKind}/{toId}", "", handleAssociationDelete(st, organizationKind, log))
	v1("POST /v1/associations/batch/{op}", "", handleAssociationBatch(st, log))
}

// handleHealthz answers 200 while the server runs, whatever the database's state (see handleReadyz).
func handleHealthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, r, http.StatusOK, []byte(`{"status":"ok"}`+"\n"))
	})
}

// handleReadyz answers 200 when the database answers with the schema this binary expects or a newer
// one (in a rolling upgrade the old servers, whose statements it still serves, stay in), else 503.
func handleReadyz(st *store, log *slog.Logger) http.Handler {
	want := latestSchemaVersion()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		v, err := st.schemaVersion(ctx)
		if err != nil {
			log.Warn("not ready", "err", err)
		}
		if err != nil || v < want {
			w.Header().Set("Retry-After", "1")
			writeProblem(w, r, &apiError{Status: http.StatusServiceUnavailable, Code: "not_ready",
				Detail: "The database is not reachable or its schema is not current."})
			return
		}
		writeJSON(w, r, http.StatusOK, fmt.Appendf(nil, `{"status":"ready","schemaVersion":%d}`+"\n", v))
	})
}

// handleNoRoute is the catch-all: 405 with Allow when the path exists for other methods, else 404.
// Both are problem bodies, so the mux's plain-text answers never reach a client.
func handleNoRoute(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var allow []string
		for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"} {
			probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: r.Header}
			if _, pattern := mux.Handler(probe); pattern != "/" && pattern != "" {
				allow = append(allow, m)
			}
		}
		if len(allow) == 0 {
			writeProblem(w, r, errNoRoute(r))
			return
		}
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeProblem(w, r, &apiError{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed",
			Detail: fmt.Sprintf("%s is not allowed on %s; allowed: %s.", r.Method, r.URL.Path, strings.Join(allow, ", "))})
	})
}

// errNoRoute is the 404 of a path no route serves.
func errNoRoute(r *http.Request) *apiError {
	return &apiError{Status: http.StatusNotFound, Code: "not_found", Detail: fmt.Sprintf("No such path: %s.", r.URL.Path)}
}

// cmdMigrate is `rolodex migrate`: it applies the schema files the database does not have yet.
func cmdMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return withStore(newFlags("migrate", "migrate [flags]", stderr), getenv, args, 0, func(st *store) error {
		applied, err := st.migrate(ctx)
		switch {
		case err == nil && len(applied) == 0:
			fmt.Fprintf(stdout, "schema is current (version %d)\n", latestSchemaVersion())
		case err == nil:
			fmt.Fprintf(stdout, "applied schema versions %v\n", applied)
		}
		return err
	})
}

// routesOf returns the mux patterns of the route pattern with their handlers: the pattern, or for a
// batch route (.../batch/{op}) one per op, {op} set as the mux would: the wildcard would overlap
// .../{id}/merge, which Go's ServeMux refuses. (Business has no upsert: handleBatch answers 404.)
func routesOf(pattern string, h http.Handler) map[string]http.Handler {
	base, batch := strings.CutSuffix(pattern, "{op}")
	if !batch {
		return map[string]http.Handler{pattern: h}
	}
	routes := map[string]http.Handler{}
	for _, op := range []string{"create", "update", "delete", "upsert"} {
		routes[base+op] = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Pattern = pattern // one route, for the metrics and the log
			r.SetPathValue("op", op)
			h.ServeHTTP(w, r)
		})
	}
	return routes
}
