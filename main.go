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
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// version is stamped at build time with -ldflags "-X main.version=v1.2.3".
var version = ""

const usage = `rolodex: a CRM API server for contacts and business records.

Usage:
  rolodex serve   [-addr :8080] [-database-url URL]   run the API server (migrates at start)
  rolodex migrate [-database-url URL]                 apply the database schema
  rolodex company create -name NAME                   create a company, its first user and an API key
  rolodex key create -company ID [-user ID]           create an API key
  rolodex key revoke KEY_PREFIX                       revoke an API key by its prefix
  rolodex dev     [-addr :8080] [-dir .rolodex-dev]   local PostgreSQL, demo data and the server
  rolodex version                                     print the version

Run "rolodex COMMAND -h" for a command's flags. DATABASE_URL, ROLODEX_ADDR and the other
ROLODEX_* variables set the same options as the flags; a flag wins over its variable.
`

var errUsage = errors.New("usage")

func main() {
	if err := tuneGC(os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "rolodex:", err)
		os.Exit(2)
	}
	err := run(context.Background(), os.Args, os.Getenv, os.Stdout, os.Stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "rolodex:", err)
		os.Exit(1)
	}
}

// defaultMemoryLimit is the memory, in MiB, the Go runtime aims to stay under (ROLODEX_MEMORY_LIMIT).
const defaultMemoryLimit = 40

// tuneGC sets the process's garbage collector: it collects only as the memory in use nears
// ROLODEX_MEMORY_LIMIT MiB (default 40; 0 keeps Go's default, collecting whenever the heap has
// doubled). A request leaves almost nothing behind, so the live heap stays a few MiB and Go's default
// collects dozens of times a second under load; `make bench` serves about a fifth more requests a
// second this way. GOGC or GOMEMLIMIT in the environment win: the runtime has read them. This is in
// main, not run, because it changes the whole process and the tests call run in theirs.
func tuneGC(getenv func(string) string) error {
	mib, err := envInt(getenv, "ROLODEX_MEMORY_LIMIT", defaultMemoryLimit)
	if err != nil {
		return err
	}
	if mib < 0 {
		return fmt.Errorf("ROLODEX_MEMORY_LIMIT must be 0 or more MiB, not %d", mib)
	}
	if mib == 0 || getenv("GOGC") != "" || getenv("GOMEMLIMIT") != "" {
		return nil
	}
	debug.SetMemoryLimit(int64(mib) << 20)
	debug.SetGCPercent(-1)
	return nil
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
	cmd, rest := args[1], args[2:]
	if (cmd == "company" || cmd == "key") && len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		cmd, rest = cmd+" "+rest[0], rest[1:]
	}
	switch cmd {
	case "serve":
		return cmdServe(ctx, rest, getenv, stderr)
	case "migrate":
		return cmdMigrate(ctx, rest, getenv, stdout, stderr)
	case "company create":
		return cmdCompanyCreate(ctx, rest, getenv, stdout, stderr)
	case "key create":
		return cmdKeyCreate(ctx, rest, getenv, stdout, stderr)
	case "key revoke":
		return cmdKeyRevoke(ctx, rest, getenv, stdout, stderr)
	case "dev":
		return cmdDev(ctx, rest, getenv, stdout, stderr)
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

// parseFlags parses args and rejects positional arguments beyond want.
func parseFlags(fs *flag.FlagSet, args []string, want int) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != want {
		fs.Usage()
		return errUsage
	}
	return nil
}

// envOr returns getenv(key), or def when it is unset.
func envOr(getenv func(string) string, key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}

// envInt is envOr for integers; an unparsable value is an error at start, not a silent default.
func envInt(getenv func(string) string, key string, def int) (int, error) {
	v := getenv(key)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: not an integer", key, v)
	}
	return n, nil
}

// dbFlags adds the database options shared by every command that talks to PostgreSQL.
func dbFlags(fs *flag.FlagSet, getenv func(string) string) (*dbConfig, error) {
	conns, err := envInt(getenv, "ROLODEX_DB_MAX_CONNS", 16)
	if err != nil {
		return nil, err
	}
	cfg := &dbConfig{}
	fs.StringVar(&cfg.url, "database-url", getenv("DATABASE_URL"), "PostgreSQL URL (env DATABASE_URL)")
	fs.IntVar(&cfg.maxConns, "db-max-conns", conns, "connection pool size (env ROLODEX_DB_MAX_CONNS)")
	fs.DurationVar(&cfg.statementTimeout, "statement-timeout", 10*time.Second, "per-statement limit in PostgreSQL")
	return cfg, nil
}

// openDB opens the store named by cfg, failing clearly when no URL was given.
func openDB(cfg *dbConfig) (*store, error) {
	if cfg.url == "" {
		return nil, errors.New("no database: set DATABASE_URL or -database-url (or try `rolodex dev`)")
	}
	return openStore(*cfg)
}

// serveConfig is everything `rolodex serve` needs besides the database.
type serveConfig struct {
	addr            string
	shutdownTimeout time.Duration
	limits          limits
}

// limits are what newHandler holds each request to.
type limits struct {
	rate           int           // requests a second per API key, in bursts of twice that; 0: unlimited
	authFailures   int           // failed authentications a minute per client address; 0: unlimited
	requestTimeout time.Duration // bound on a request's database work; 0: none
}

func cmdServe(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	fs := newFlags("serve", "serve [flags]", stderr)
	dbc, err := dbFlags(fs, getenv)
	if err != nil {
		return err
	}
	rate, err := envInt(getenv, "ROLODEX_RATE_LIMIT", defaultRateLimit)
	if err != nil {
		return err
	}
	fails, err := envInt(getenv, "ROLODEX_AUTH_FAILURE_LIMIT", defaultAuthFailureLimit)
	if err != nil {
		return err
	}
	var sc serveConfig
	fs.StringVar(&sc.addr, "addr", envOr(getenv, "ROLODEX_ADDR", ":8080"), "listen address (env ROLODEX_ADDR)")
	fs.DurationVar(&sc.shutdownTimeout, "shutdown-timeout", 15*time.Second, "how long requests in flight may take at shutdown")
	fs.IntVar(&sc.limits.rate, "rate-limit", rate, "requests a second per API key, in bursts of twice that; 0: off (env ROLODEX_RATE_LIMIT)")
	fs.IntVar(&sc.limits.authFailures, "auth-failure-limit", fails, "failed authentications a minute per client address; 0: off (env ROLODEX_AUTH_FAILURE_LIMIT)")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if sc.limits.rate < 0 || sc.limits.authFailures < 0 {
		return fmt.Errorf("-rate-limit and -auth-failure-limit must be 0 or more: %w", errUsage)
	}
	// A request's queries together get as long as one statement may take.
	sc.limits.requestTimeout = dbc.statementTimeout
	st, err := openDB(dbc)
	if err != nil {
		return err
	}
	defer st.Close()
	return serve(ctx, st, sc, newLogger(stderr), nil)
}

// newHTTPServer is the http.Server of `rolodex serve` (the load benchmark's in-process servers use it
// too, so that they measure the same stack).
func newHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		// Go's default: room for a long query string to reach withQueryLimit and get a problem body.
		MaxHeaderBytes: 1 << 20,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// serve migrates the database (waiting for it to come up), listens, and serves until ctx is done,
// then shuts down gracefully: no new connections, requests in flight finish within
// sc.shutdownTimeout. ready, when not nil, is called with the listening address.
func serve(ctx context.Context, st *store, sc serveConfig, log *slog.Logger, ready func(addr string)) error {
	defer flushLog(log) // the log's last lines, "stopped" among them, are out before serve returns
	if err := waitAndMigrate(ctx, st, log); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", sc.addr)
	if err != nil {
		return err
	}
	srv := newHTTPServer(newHandlerWith(st, log, sc.limits), log)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
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
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sc.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

// waitAndMigrate migrates, retrying with backoff while the database is unreachable, so a server
// started before its database comes up by itself when the database does.
func waitAndMigrate(ctx context.Context, st *store, log *slog.Logger) error {
	delay := 250 * time.Millisecond
	for {
		applied, err := st.migrate(ctx)
		if err == nil {
			if len(applied) > 0 {
				log.Info("migrated", "versions", applied)
			}
			return nil
		}
		if !isDBUnavailable(err) || ctx.Err() != nil {
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

// defaultLimits are the limits of `rolodex serve` without flags (its request deadline aside).
var defaultLimits = limits{rate: defaultRateLimit, authFailures: defaultAuthFailureLimit}

// newHandler is newHandlerWith the default limits.
func newHandler(st *store, log *slog.Logger) http.Handler {
	return newHandlerWith(st, log, defaultLimits)
}

// newHandlerWith is the whole HTTP stack: the routes inside the middleware, composed here and only
// here. Outermost first: request id, request deadline, access log and recovery; gzip; the
// query-string bound; authentication (with its failure limit); the per-key rate limit; the routes.
func newHandlerWith(st *store, log *slog.Logger, lim limits) http.Handler {
	mux := http.NewServeMux()
	addRoutes(mux, st, log)
	return withMiddleware(withPattern(mux), st, log, lim)
}

// withMiddleware wraps the routes h in the whole middleware chain (bench_test.go wraps a static
// handler in the same chain: the HTTP stack's ceiling).
func withMiddleware(h http.Handler, st *store, log *slog.Logger, lim limits) http.Handler {
	h = withRateLimit(newRateLimiter(lim.rate), h)
	h = withAuth(newAuthenticator(st), newFailureLimiter(lim.authFailures), log, h)
	h = withQueryLimit(h)
	h = withGzip(h)
	h = withRequestLog(log, newRequestIDs(), lim.requestTimeout, h)
	return h
}

// routeTable is what addRoutes registers on: an *http.ServeMux, or in tests one that also records
// the patterns.
type routeTable interface {
	Handle(pattern string, handler http.Handler)
	Handler(r *http.Request) (h http.Handler, pattern string)
}

// addRoutes lists every endpoint of the server; api/openapi.json describes each of them.
func addRoutes(mux routeTable, st *store, log *slog.Logger) {
	mux.Handle("GET /healthz", handleHealthz())
	mux.Handle("GET /readyz", handleReadyz(st, log))
	mux.Handle("GET /v1/openapi.json", handleOpenAPI())

	contacts := contactsResource(st)
	mux.Handle("GET /v1/contacts", handleList(contacts, log))
	mux.Handle("GET /v1/contacts/count", handleCount(contacts, log))
	mux.Handle("GET /v1/contacts/{id}", handleGet(contacts, log))
	mux.Handle("POST /v1/contacts", handleCreate(contacts, log))
	mux.Handle("PATCH /v1/contacts/{id}", handleUpdate(contacts, log))
	mux.Handle("DELETE /v1/contacts/{id}", handleDelete(contacts, log))

	business := businessResource(st)
	mux.Handle("GET /v1/business", handleList(business, log))
	mux.Handle("GET /v1/business/count", handleCount(business, log))
	mux.Handle("GET /v1/business/{id}", handleGet(business, log))
	mux.Handle("POST /v1/business", handleCreate(business, log))
	mux.Handle("PATCH /v1/business/{id}", handleUpdate(business, log))
	mux.Handle("DELETE /v1/business/{id}", handleDelete(business, log))

	users, orgs, stages, boards := usersResource(st), organizationsResource(st), stagesResource(st), boardsResource(st)
	mux.Handle("GET /v1/users", handleList(users, log))
	mux.Handle("GET /v1/users/{id}", handleGet(users, log))
	mux.Handle("GET /v1/organizations", handleList(orgs, log))
	mux.Handle("GET /v1/organizations/{id}", handleGet(orgs, log))
	mux.Handle("POST /v1/organizations", handleCreate(orgs, log))
	mux.Handle("GET /v1/stages", handleList(stages, log))
	mux.Handle("GET /v1/stages/{id}", handleGet(stages, log))
	mux.Handle("GET /v1/boards", handleList(boards, log))
	mux.Handle("GET /v1/boards/{id}", handleGet(boards, log))
	mux.Handle("GET /v1/statuses", handleList(statusesResource(st), log))
	mux.Handle("GET /v1/currencies", handleList(currenciesResource(st), log))
	mux.Handle("GET /v1/countries", handleList(countriesResource(st), log))

	mux.Handle("/", handleNoRoute(mux))
}

// Header values the server sets by direct map assignment, under their canonical keys: Header.Set
// would canonicalize the key and allocate the value's slice on every request. They are shared, so
// never modified: net/http only reads them, and Header.Add appends to a copy (their len is their cap).
var (
	jsonContentType    = []string{"application/json"}
	problemContentType = []string{"application/problem+json"}
	nosniff            = []string{"nosniff"}
	noStore            = []string{"no-store"}
	varyAcceptEncoding = []string{"Accept-Encoding"}
)

// writeJSON writes a JSON body that is already encoded.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	w.Write(body)
}

func handleHealthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, []byte(`{"status":"ok"}`+"\n"))
	})
}

// handleReadyz answers 200 when the database answers and its schema is the one this binary
// expects, else 503.
func handleReadyz(st *store, log *slog.Logger) http.Handler {
	want := latestSchemaVersion()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		v, err := st.schemaVersion(ctx)
		if err != nil || v != want {
			if err != nil {
				log.Warn("not ready", "err", err)
			}
			w.Header().Set("Retry-After", "1")
			writeProblem(w, r, &apiError{Status: http.StatusServiceUnavailable, Code: "not_ready",
				Detail: "The database is not reachable or its schema is not current."})
			return
		}
		b := append([]byte(`{"status":"ready","schemaVersion":`), strconv.Itoa(v)...)
		writeJSON(w, http.StatusOK, append(b, "}\n"...))
	})
}

// probeMethods are the methods handleNoRoute tries when deciding between 404 and 405.
var probeMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
	http.MethodPatch, http.MethodDelete}

// handleNoRoute is the catch-all: 405 with Allow when the path exists for other methods, else 404.
// Both are problem bodies, so the mux's plain-text answers never reach a client.
func handleNoRoute(mux routeTable) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var allow []string
		for _, m := range probeMethods {
			probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: r.Header}
			if _, pattern := mux.Handler(probe); pattern != "/" && pattern != "" {
				allow = append(allow, m)
			}
		}
		if len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeProblem(w, r, &apiError{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed",
				Detail: fmt.Sprintf("%s is not allowed on %s; allowed: %s.", r.Method, r.URL.Path, strings.Join(allow, ", "))})
			return
		}
		writeProblem(w, r, &apiError{Status: http.StatusNotFound, Code: "not_found",
			Detail: fmt.Sprintf("No such path: %s.", r.URL.Path)})
	})
}

func cmdMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("migrate", "migrate [flags]", stderr)
	dbc, err := dbFlags(fs, getenv)
	if err != nil {
		return err
	}
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	st, err := openDB(dbc)
	if err != nil {
		return err
	}
	defer st.Close()
	applied, err := st.migrate(ctx)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Fprintf(stdout, "schema is current (version %d)\n", latestSchemaVersion())
		return nil
	}
	fmt.Fprintf(stdout, "applied schema versions %v\n", applied)
	return nil
}

func cmdCompanyCreate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("company create", "company create -name NAME [flags]", stderr)
	dbc, err := dbFlags(fs, getenv)
	if err != nil {
		return err
	}
	name := fs.String("name", "", "company name (required)")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if *name = strings.TrimSpace(*name); *name == "" || len(*name) > 255 {
		fs.Usage()
		return fmt.Errorf("-name is required (1 to 255 characters): %w", errUsage)
	}
	st, err := openDB(dbc)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.migrate(ctx); err != nil {
		return err
	}
	nc, err := st.createCompany(ctx, *name)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "{\"companyId\":%d,\"userId\":%d,\"apiKey\":%s}\n", nc.CompanyID, nc.UserID,
		appendString(nil, nc.APIKey))
	return nil
}

func cmdKeyCreate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("key create", "key create -company ID [-user ID] [flags]", stderr)
	dbc, err := dbFlags(fs, getenv)
	if err != nil {
		return err
	}
	company := fs.Int64("company", 0, "company id (required)")
	user := fs.Int64("user", 0, "user id (default: the company's first user)")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if *company <= 0 || *user < 0 {
		fs.Usage()
		return fmt.Errorf("-company must be a positive id: %w", errUsage)
	}
	st, err := openDB(dbc)
	if err != nil {
		return err
	}
	defer st.Close()
	key, err := st.createAPIKey(ctx, *company, *user)
	if errors.Is(err, errNotFound) {
		return fmt.Errorf("no company %d with user %d", *company, *user)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, key)
	return nil
}

func cmdKeyRevoke(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("key revoke", "key revoke [flags] KEY_PREFIX", stderr)
	dbc, err := dbFlags(fs, getenv)
	if err != nil {
		return err
	}
	if err := parseFlags(fs, args, 1); err != nil {
		return err
	}
	prefix := fs.Arg(0)
	st, err := openDB(dbc)
	if err != nil {
		return err
	}
	defer st.Close()
	err = st.revokeAPIKey(ctx, prefix)
	if errors.Is(err, errNotFound) {
		return fmt.Errorf("no active key with prefix %q", prefix)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "revoked %s (servers stop accepting it within %s)\n", prefix[:min(len(prefix), keyPrefixLen)], keyCacheTTL)
	return nil
}

func cmdDev(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("dev", "dev [flags]", stderr)
	dir := fs.String("dir", ".rolodex-dev", "folder for the local PostgreSQL's data (kept across runs)")
	addr := fs.String("addr", envOr(getenv, "ROLODEX_ADDR", ":8080"), "listen address (env ROLODEX_ADDR)")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if moved, ok := reachableDataDir(*dir); ok {
		fmt.Fprintf(stdout, "PostgreSQL cannot run as root, and its user cannot reach %s: using %s\n", *dir, moved)
		*dir = moved
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	pglog, err := os.OpenFile(*dir+"/postgres.log", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer pglog.Close()
	fmt.Fprintf(stdout, "starting PostgreSQL in %s (log: %s/postgres.log)\n", *dir, *dir)
	pg, err := startLocalPG(ctx, *dir, pglog, false)
	if err != nil {
		return err
	}
	defer pg.Stop()
	if err := ensureDatabase(ctx, pg.URL("postgres"), "rolodex"); err != nil {
		return err
	}
	st, err := openStore(dbConfig{url: pg.URL("rolodex"), maxConns: 8, statementTimeout: 10 * time.Second})
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.migrate(ctx); err != nil {
		return err
	}
	demo, err := st.demoCompany(ctx)
	if err != nil {
		return err
	}
	log := newLogger(stderr)
	lim := defaultLimits
	lim.requestTimeout = 10 * time.Second // the statement timeout below
	sc := serveConfig{addr: *addr, shutdownTimeout: 5 * time.Second, limits: lim}
	return serve(ctx, st, sc, log, func(a string) {
		base := "http://" + strings.Replace(a, "[::]", "localhost", 1)
		fmt.Fprintf(stdout, "\nRolodex is serving the demo company (id %d) at %s\n", demo.CompanyID, base)
		fmt.Fprintf(stdout, "API key: %s\n", demo.APIKey)
		fmt.Fprintf(stdout, "Try:     curl -H 'x-api-key: %s' %s/v1/contacts\n", demo.APIKey, base)
		fmt.Fprintf(stdout, "DATABASE_URL=%s\nStop with Ctrl-C.\n\n", pg.URL("rolodex"))
	})
}
