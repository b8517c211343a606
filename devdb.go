package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	osuser "os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cmdDev is `rolodex dev`: a local PostgreSQL in a folder (localPG, which the tests use too),
// migrated, the demo company with its key kept in the folder across runs, and the server, until ctx
// is done.
func cmdDev(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	flags := newFlags("dev", "dev [flags]", stderr)
	dir := flags.String("dir", ".rolodex-dev", "folder for the local PostgreSQL's data and the demo key (kept across runs)")
	// This machine only by default: the server prints the demo key, which may do anything.
	server := addServerFlags(flags, "127.0.0.1:8080")
	server.hookCIDRs = "127.0.0.1/32" // webhooks may go to a receiver on this machine (the document's example)
	if err := parseFlags(flags, getenv, args, 0); err != nil {
		return err
	}
	lim, err := server.limits()
	if err != nil {
		return err
	}
	// As root, the server runs as another user, who may not reach the folder (a checkout under
	// /root, say): then the data goes to a folder of this checkout's own under the temp folder.
	abs, _ := filepath.Abs(*dir)
	runAs, err := pgRunAs() // an error is startLocalPG's to report
	if err == nil && runAs != nil && runAs.blockedAncestor(filepath.Dir(abs)) != "" {
		sum := sha256.Sum256([]byte(abs))
		moved := filepath.Join(os.TempDir(), fmt.Sprintf("rolodex-dev-%x", sum[:4]))
		fmt.Fprintf(stdout, "PostgreSQL cannot run as root, and its user cannot reach %s: using %s\n", *dir, moved)
		*dir = moved
	}
	fmt.Fprintf(stdout, "starting PostgreSQL in %s (log: %s)\n", *dir, filepath.Join(*dir, "postgres.log"))
	pg, err := startLocalPG(ctx, *dir, false)
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
	// The demo key is kept in the folder, so that it stays the same across runs.
	keyFile := filepath.Join(*dir, "demo-key")
	saved, _ := os.ReadFile(keyFile)
	demo, err := st.demoCompany(ctx, strings.TrimSpace(string(saved)))
	if err != nil {
		return err
	}
	if err := os.WriteFile(keyFile, []byte(demo.APIKey+"\n"), 0o600); err != nil {
		return err
	}
	return serve(ctx, st, server.addr, 5*time.Second, lim, slog.New(slog.NewJSONHandler(stderr, nil)), func(a string) {
		base := "http://" + strings.Replace(a, "[::]", "localhost", 1)
		fmt.Fprintf(stdout, "\nRolodex is serving the demo company (id %d) at %s\n", demo.CompanyID, base)
		fmt.Fprintf(stdout, "API key: %s\n", demo.APIKey)
		fmt.Fprintf(stdout, "Try:     curl -H 'x-api-key: %s' %s/v1/contacts\n", demo.APIKey, base)
		fmt.Fprintf(stdout, "DATABASE_URL=%s\nStop with Ctrl-C.\n\n", pg.URL("rolodex"))
	})
}

// localPG is a PostgreSQL server started by startLocalPG. pg_ctl detaches it from this process: it
// runs until Stop, even when this process dies.
type localPG struct {
	pgCtl string // the pg_ctl program
	dir   string // the folder of data/ and postgres.log
	runAs *pgUser
	port  int
}

// pgUser is the account the server runs as when this process is root, which PostgreSQL refuses.
type pgUser struct {
	name string
	uid  uint32
	gid  uint32
}

// startLocalPG starts (initialising on first use) a PostgreSQL server with its data in dir/data and
// its log in dir/postgres.log, listening on 127.0.0.1 on a free port below 32000, with superuser
// "postgres" and trust auth on loopback only. It first stops a server that an earlier, killed run
// left running on dir. fast turns off fsync and the like, for throw-away test clusters. It returns
// when the server accepts connections; ctx bounds the start only. With no PostgreSQL binaries on the
// machine, the error says what to install.
func startLocalPG(ctx context.Context, dir string, fast bool) (*localPG, error) {
	pgCtl, err := findPGCtl(filepath.SplitList(os.Getenv("PATH")),
		"/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin", "/usr/local/opt/postgresql*/bin", "/opt/homebrew/opt/postgresql*/bin")
	if err != nil {
		return nil, err
	}
	dir, err = filepath.Abs(dir) // the programs run in dir: every path must be absolute
	if err != nil {
		return nil, err
	}
	runAs, err := pgRunAs()
	if err != nil {
		return nil, err
	}
	p := &localPG{pgCtl: pgCtl, dir: dir, runAs: runAs}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if p.runAs != nil {
		if blocked := p.runAs.blockedAncestor(filepath.Dir(dir)); blocked != "" {
			return nil, fmt.Errorf("PostgreSQL runs as user %s, who cannot enter %s: make it searchable (chmod o+x) or use another folder", p.runAs.name, blocked)
		}
		// Hand the user the folder, its log and its data (made by root or another account, say),
		// leaving any error to initdb or the server to report.
		uid, gid := int(p.runAs.uid), int(p.runAs.gid)
		os.Lchown(dir, uid, gid)
		os.Lchown(filepath.Join(dir, "postgres.log"), uid, gid)
		filepath.WalkDir(filepath.Join(dir, "data"), func(path string, _ fs.DirEntry, _ error) error {
			os.Lchown(path, uid, gid)
			return nil
		})
	}
	if err := p.initdb(ctx, fast); err != nil {
		return nil, err
	}
	// A server left running by an earlier run that was killed. After a container restart its pid is
	// often this process's own, or its parent's: pg_ctl status believes neither (this one is its parent).
	if p.pidFileLine(0) != strconv.Itoa(os.Getppid()) && p.ctl(ctx, "status").Run() == nil {
		p.ctl(ctx, "stop", "-m", "fast").Run()
	}
	err = p.start(ctx, fast)
	if err != nil && strings.Contains(err.Error(), "Address already in use") {
		err = p.start(ctx, fast) // another process took the port meanwhile
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// URL is the connection URL of database dbname on the server, as its superuser.
func (p *localPG) URL(dbname string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.port, url.PathEscape(dbname))
}

// Stop shuts the server down (fast mode) and waits for it to exit. It does nothing when the server
// is gone already: stopped, or replaced by a later start on the same folder.
func (p *localPG) Stop() error {
	if p.pidFileLine(3) != strconv.Itoa(p.port) {
		return nil
	}
	if out, err := p.ctl(context.Background(), "stop", "-m", "fast", "-t", "30").CombinedOutput(); err != nil {
		p.ctl(context.Background(), "stop", "-m", "immediate").Run()
		return fmt.Errorf("stop postgres: %w: %s\nlog:\n%s", err, bytes.TrimSpace(out), p.logTail())
	}
	return nil
}

// start has pg_ctl start the server and wait until it accepts connections. The port is below the
// ephemeral range (32768 and up on Linux): there a retrying client can connect to itself on the port
// and keep a restarted server from binding it.
func (p *localPG) start(ctx context.Context, fast bool) error {
	for range 100 {
		p.port = 20000 + rand.IntN(12000)
		if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p.port)); err == nil {
			l.Close()
			break
		}
	}
	// logging_collector=off: some distributions turn it on, and the log must stay in postgres.log.
	opts := "-p " + strconv.Itoa(p.port) + " -k '' -c listen_addresses=127.0.0.1 -c max_connections=200 -c logging_collector=off"
	if fast {
		opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
	}
	out, err := p.ctl(ctx, "start", "-w", "-t", "30", "-l", filepath.Join(p.dir, "postgres.log"), "-o", opts).CombinedOutput()
	if err != nil {
		p.ctl(context.Background(), "stop", "-m", "immediate").Run() // pg_ctl may have given up on a server still starting
		return fmt.Errorf("start postgres: %w: %s\nlog:\n%s", cmp.Or(ctx.Err(), err), bytes.TrimSpace(out), p.logTail())
	}
	return nil
}

// initdb creates the cluster in dir/data unless it is there. Text sorts by code point (collation C);
// lower() and ILIKE know Unicode case (ctype C.UTF-8) where the system has it.
func (p *localPG) initdb(ctx context.Context, fast bool) error {
	if _, err := os.Stat(filepath.Join(p.dir, "data", "PG_VERSION")); err == nil {
		return nil
	}
	var out []byte
	var err error
	for _, ctype := range []string{"C.UTF-8", "C"} {
		opts := "-U postgres --auth=trust -E UTF8 --locale=C --lc-ctype=" + ctype
		if fast {
			opts += " --no-sync"
		}
		out, err = p.ctl(ctx, "initdb", "-o", opts).CombinedOutput()
		if err == nil {
			return nil
		}
	}
	return fmt.Errorf("initdb: %w: %s", err, bytes.TrimSpace(out))
}

// ctl returns the command running pg_ctl with args on the data folder, in dir (PostgreSQL's programs
// fail in a working folder their user cannot enter) and, when this process is root, as the server's user.
func (p *localPG) ctl(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, p.pgCtl, append([]string{"-D", filepath.Join(p.dir, "data")}, args...)...)
	cmd.Dir = p.dir
	if p.runAs != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: p.runAs.uid, Gid: p.runAs.gid}}
	}
	return cmd
}

// pidFileLine returns line n of the server's postmaster.pid (0: its pid, 3: its port), or "".
func (p *localPG) pidFileLine(n int) string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "data", "postmaster.pid"))
	lines := strings.Split(string(b), "\n")
	if n < len(lines) {
		return lines[n]
	}
	return ""
}

// logTail returns the last 4 KiB of the server's log, for an error that the log explains.
func (p *localPG) logTail() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "postgres.log"))
	return string(bytes.TrimSpace(b[max(0, len(b)-4<<10):]))
}

// pgRunAs returns the account to run the server as: nil (this process's) unless this is root.
func pgRunAs() (*pgUser, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		if u, err := osuser.Lookup(name); err == nil {
			uid, _ := strconv.ParseUint(u.Uid, 10, 32) // numbers on Unix
			gid, _ := strconv.ParseUint(u.Gid, 10, 32)
			return &pgUser{name: name, uid: uint32(uid), gid: uint32(gid)}, nil
		}
	}
	return nil, errors.New(`running as root and neither user "postgres" nor "nobody" exists; PostgreSQL refuses to run as root`)
}

// blockedAncestor returns the first of dir and its parents but / that u may not search, or "".
func (u *pgUser) blockedAncestor(dir string) string {
	for d := dir; d != filepath.Dir(d); d = filepath.Dir(d) {
		info, err := os.Stat(d)
		if err != nil {
			continue
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			continue // no owner to judge by (not Unix): let the server's start say
		}
		perm := info.Mode().Perm()
		if !(st.Uid == u.uid && perm&0o100 != 0 || st.Gid == u.gid && perm&0o010 != 0 || perm&0o001 != 0) {
			return d
		}
	}
	return ""
}

// findPGCtl returns the path of pg_ctl (which finds initdb and postgres beside its real self) in the
// first absolute folder holding it: of pathDirs, else of the folders matching installPatterns (the server bin
// folders of the usual packages) by version, highest first: .../10/bin before .../9.6/bin.
func findPGCtl(pathDirs []string, installPatterns ...string) (string, error) {
	var installDirs []string
	for _, pattern := range installPatterns {
		matches, _ := filepath.Glob(pattern)
		installDirs = append(installDirs, matches...)
	}
	// A version is the numbers in the name of the bin folder's parent: "15", "pgsql-9.6", "postgresql@16".
	version := func(dir string) []int {
		var v []int
		for _, f := range strings.FieldsFunc(filepath.Base(filepath.Dir(dir)), func(r rune) bool { return r < '0' || r > '9' }) {
			n, _ := strconv.Atoi(f)
			v = append(v, n)
		}
		return v
	}
	slices.SortStableFunc(installDirs, func(a, b string) int { return slices.Compare(version(b), version(a)) })
	for _, dir := range slices.Concat(pathDirs, installDirs) {
		if !filepath.IsAbs(dir) {
			continue // a relative PATH entry would resolve against the programs' working folder
		}
		if path, err := exec.LookPath(filepath.Join(dir, "pg_ctl")); err == nil {
			return path, nil
		}
	}
	return "", errors.New(`no PostgreSQL server binaries found (pg_ctl, initdb, postgres): ` +
		`install them with "sudo apt-get install postgresql" (Debian/Ubuntu) or set DATABASE_URL`)
}

// ensureDatabase creates database name on the server at adminURL unless it exists.
func ensureDatabase(ctx context.Context, adminURL, name string) error {
	st, err := openStore(dbConfig{url: adminURL, maxConns: 1})
	if err != nil {
		return err
	}
	defer st.Close()
	var exists bool
	if err := st.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return fmt.Errorf("look for database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	if _, err := st.db.ExecContext(ctx, `CREATE DATABASE `+quoteIdent(name)); err != nil && pgCode(err) != "42P04" { // no parameters here
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// quoteIdent quotes s as an SQL identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
