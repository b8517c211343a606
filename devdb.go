package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	osuser "os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A local PostgreSQL for `rolodex dev` and the tests: started from the server binaries on the
// machine, under a data folder of its own, on loopback only.

const (
	pgReadyLine    = "database system is ready to accept connections"
	pgStartTimeout = 30 * time.Second
	pgStopTimeout  = 10 * time.Second
	pgLogTailBytes = 4 << 10
)

// localPG is a PostgreSQL server started by this process.
type localPG struct {
	cmd      *exec.Cmd
	port     int
	log      *pgLog
	exited   chan struct{} // closed once cmd.Wait has returned
	waitErr  error         // what cmd.Wait returned; read only after exited is closed
	stopOnce sync.Once
	stopErr  error
}

// pgBinaries are the absolute paths of the PostgreSQL programs; pgCtl may be empty.
type pgBinaries struct{ initdb, postgres, pgCtl string }

// pgUser is the unprivileged account the server runs as when this process is root: PostgreSQL
// refuses to run as root.
type pgUser struct {
	name     string
	uid, gid uint32
}

// startLocalPG starts (initialising on first use) a PostgreSQL server whose data lives in dir/data,
// listening on 127.0.0.1 on a free port below 32000, with superuser "postgres" and trust auth on
// loopback only. logw receives the server's log (nil: discarded). fast turns off fsync and the like,
// for throw-away test clusters. It returns when the server accepts connections; ctx bounds the start
// only. With no PostgreSQL binaries on the machine, the error says what to install.
func startLocalPG(ctx context.Context, dir string, logw io.Writer, fast bool) (*localPG, error) {
	bins, err := findPGBinariesIn(filepath.SplitList(os.Getenv("PATH")), pgVersionedBinDirs())
	if err != nil {
		return nil, err
	}
	if dir, err = filepath.Abs(dir); err != nil { // the children run in dir: every path must be absolute
		return nil, err
	}
	runAs, err := pgRunAs()
	if err != nil {
		return nil, err
	}
	if err := preparePGDir(dir, runAs); err != nil {
		return nil, err
	}
	dataDir := filepath.Join(dir, "data")
	if err := initPGData(ctx, bins, dir, dataDir, runAs, fast); err != nil {
		return nil, err
	}
	if bins.pgCtl != "" && pgPIDFileLive(filepath.Join(dataDir, "postmaster.pid")) {
		// A server left running by an earlier run that was killed: stop it (errors do not matter,
		// PostgreSQL itself clears a pid file whose process is gone).
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		cmd := exec.CommandContext(sctx, bins.pgCtl, "-D", dataDir, "stop", "-m", "fast", "-w", "-t", "20")
		configurePGChild(cmd, dir, runAs)
		cmd.Run()
		cancel()
	}
	if logw == nil {
		logw = io.Discard
	}
	p, err := launchPG(ctx, bins, dir, runAs, logw, fast)
	if err != nil && strings.Contains(err.Error(), "Address already in use") {
		p, err = launchPG(ctx, bins, dir, runAs, logw, fast) // another process took the port meanwhile
	}
	return p, err
}

// URL returns a connection URL for database dbname on this server.
func (p *localPG) URL(dbname string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.port, url.PathEscape(dbname))
}

// Stop shuts the server down (fast mode) and waits for it to exit; later calls return the first's result.
func (p *localPG) Stop() error {
	p.stopOnce.Do(func() {
		// SIGINT is PostgreSQL's "fast" shutdown: abort sessions, checkpoint, exit.
		p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.exited:
		case <-time.After(pgStopTimeout):
			p.cmd.Process.Kill()
			<-p.exited
			p.stopErr = fmt.Errorf("stop postgres: no shutdown within %v, killed it; log:\n%s", pgStopTimeout, p.log.tail())
			return
		}
		if p.waitErr != nil {
			p.stopErr = fmt.Errorf("postgres exited: %w; log:\n%s", p.waitErr, p.log.tail())
		}
	})
	return p.stopErr
}

// launchPG starts the postgres process on a free port and waits until it is ready.
func launchPG(ctx context.Context, bins pgBinaries, dir string, runAs *pgUser, logw io.Writer, fast bool) (*localPG, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	args := []string{"-D", filepath.Join(dir, "data"), "-p", strconv.Itoa(port), "-k", "",
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200",
		"-c", "logging_collector=off"} // the log stays on stderr, so in logw
	if fast {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	p := &localPG{port: port, log: &pgLog{w: logw}, exited: make(chan struct{})}
	p.cmd = exec.Command(bins.postgres, args...)
	configurePGChild(p.cmd, dir, runAs)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.cmd.WaitDelay = 2 * time.Second // backends inherit the log pipe: do not wait on them
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start postgres%s: %w", runAs.describe(dir), err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	timeout := time.After(pgStartTimeout)
	for !p.log.sawReady() {
		select {
		case <-p.exited:
			return nil, fmt.Errorf("postgres exited during start-up (%v); log:\n%s", p.waitErr, p.log.tail())
		case <-ctx.Done():
			p.Stop()
			return nil, fmt.Errorf("waiting for postgres to start: %w", ctx.Err())
		case <-timeout:
			p.Stop()
			return nil, fmt.Errorf("postgres not ready after %v; log:\n%s", pgStartTimeout, p.log.tail())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return p, nil
}

// freePort returns a port that is free on 127.0.0.1, below the ephemeral range (32768 and up on
// Linux): there a retrying client can connect to itself on the port and keep a restarted server from
// binding it.
func freePort() (int, error) {
	var b [2]byte
	for range 100 {
		rand.Read(b[:])
		port := 20000 + int(binary.BigEndian.Uint16(b[:]))%12000
		if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			l.Close()
			return port, nil
		}
	}
	return 0, errors.New("find free port: none free below 32000")
}

// initPGData runs initdb unless dataDir already holds a cluster. Text sorts by code point
// (collation C); lower() and ILIKE know Unicode case (ctype C.UTF-8) where the system has it.
func initPGData(ctx context.Context, bins pgBinaries, dir, dataDir string, runAs *pgUser, fast bool) error {
	if _, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); err == nil {
		return nil
	}
	var err error
	for _, ctype := range []string{"C.UTF-8", "C"} {
		args := []string{"-D", dataDir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--lc-ctype=" + ctype}
		if fast {
			args = append(args, "--no-sync")
		}
		cmd := exec.CommandContext(ctx, bins.initdb, args...)
		configurePGChild(cmd, dir, runAs)
		out, cerr := cmd.CombinedOutput()
		if cerr == nil {
			return nil
		}
		err = fmt.Errorf("initdb%s: %w: %s", runAs.describe(dir), cerr, out)
	}
	return err
}

// pgPIDFileLive reports whether the pid in a postmaster.pid names a live process other than this one
// (after a container restart the old pid is often this process's own).
func pgPIDFileLive(path string) bool {
	b, err := os.ReadFile(path)
	first, _, _ := strings.Cut(string(b), "\n")
	pid, perr := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || perr != nil || pid <= 0 || pid == os.Getpid() || pid == os.Getppid() {
		return false
	}
	err = syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// configurePGChild sets the working folder, HOME and, when root, the unprivileged user of a
// PostgreSQL program (initdb and postgres stat both; root's are not reachable by that user).
func configurePGChild(cmd *exec.Cmd, dir string, runAs *pgUser) {
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir)
	if runAs != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: runAs.uid, Gid: runAs.gid}}
	}
}

// pgRunAs returns the account to run the server as: nil (this process's) unless this is root.
func pgRunAs() (*pgUser, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := osuser.Lookup(name)
		if err != nil {
			continue
		}
		uid, uerr := strconv.ParseUint(u.Uid, 10, 32)
		gid, gerr := strconv.ParseUint(u.Gid, 10, 32)
		if uerr == nil && gerr == nil {
			return &pgUser{name: name, uid: uint32(uid), gid: uint32(gid)}, nil
		}
	}
	return nil, errors.New(`running as root and neither user "postgres" nor "nobody" exists; PostgreSQL refuses to run as root`)
}

// describe names the user in error messages, and a parent of dir it cannot enter, which shows up
// only as a confusing fork/exec EACCES.
func (u *pgUser) describe(dir string) string {
	if u == nil {
		return ""
	}
	if blocked := u.blockedAncestor(dir); blocked != "" {
		return fmt.Sprintf(" (as user %s, who cannot enter %s: make it searchable, e.g. chmod o+x)", u.name, blocked)
	}
	return " (as user " + u.name + ")"
}

// blockedAncestor returns the first of dir and its parents that u may not search, or "".
func (u *pgUser) blockedAncestor(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if info, err := os.Stat(d); err == nil {
			st, _ := info.Sys().(*syscall.Stat_t)
			perm := info.Mode().Perm()
			if st != nil && !(st.Uid == u.uid && perm&0o100 != 0 || st.Gid == u.gid && perm&0o010 != 0 || perm&0o001 != 0) {
				return d
			}
		}
		if d == filepath.Dir(d) {
			return ""
		}
	}
}

// preparePGDir creates dir and, when running as root, hands it and its data (made by another account,
// say) to the server's user.
func preparePGDir(dir string, runAs *pgUser) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("postgres dir: %w", err)
	}
	if runAs == nil {
		return nil
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("postgres dir: %w", err)
	}
	if err := os.Chown(dir, int(runAs.uid), int(runAs.gid)); err != nil {
		return fmt.Errorf("postgres dir: %w", err)
	}
	dataDir := filepath.Join(dir, "data")
	if info, err := os.Stat(dataDir); err != nil || info.Sys().(*syscall.Stat_t).Uid == runAs.uid {
		return nil // no data yet, or the user's already
	}
	err := filepath.WalkDir(dataDir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, int(runAs.uid), int(runAs.gid))
	})
	if err != nil {
		return fmt.Errorf("chown postgres dir: %w", err)
	}
	return nil
}

// findPGBinariesIn looks for initdb and postgres on the PATH (pathDirs) first, then in installDirs.
func findPGBinariesIn(pathDirs, installDirs []string) (pgBinaries, error) {
	b := pgBinaries{initdb: findExecutable(pathDirs, "initdb"), postgres: findExecutable(pathDirs, "postgres")}
	if b.initdb != "" && b.postgres != "" {
		// PATH often holds only links; pg_ctl is beside the real postgres.
		dirs := []string{filepath.Dir(b.postgres)}
		if real, err := filepath.EvalSymlinks(b.postgres); err == nil {
			dirs = append([]string{filepath.Dir(real)}, dirs...)
		}
		b.pgCtl = findExecutable(dirs, "pg_ctl")
		return b, nil
	}
	for _, dir := range installDirs {
		d := []string{dir}
		b := pgBinaries{initdb: findExecutable(d, "initdb"), postgres: findExecutable(d, "postgres"), pgCtl: findExecutable(d, "pg_ctl")}
		if b.initdb != "" && b.postgres != "" {
			return b, nil
		}
	}
	return pgBinaries{}, errors.New(`no PostgreSQL server binaries found (initdb, postgres): ` +
		`install them with "sudo apt-get install postgresql" (Debian/Ubuntu) or set DATABASE_URL`)
}

// findExecutable returns the path of the first executable file called name in dirs, or "".
func findExecutable(dirs []string, name string) string {
	for _, dir := range dirs {
		if !filepath.IsAbs(dir) {
			continue // a relative PATH entry would resolve against the child's working folder
		}
		path := filepath.Join(dir, name)
		if info, err := os.Stat(path); err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0 {
			return path
		}
	}
	return ""
}

// pgVersionedBinDirs lists the server bin folders of the usual packages (Debian's, the PGDG's,
// Homebrew's), highest version first.
func pgVersionedBinDirs() []string {
	var dirs []string
	for _, pattern := range []string{"/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin",
		"/usr/local/opt/postgresql*/bin", "/opt/homebrew/opt/postgresql*/bin"} {
		matches, _ := filepath.Glob(pattern)
		dirs = append(dirs, matches...)
	}
	sortPGDirsByVersion(dirs)
	return dirs
}

// sortPGDirsByVersion sorts .../<version>/bin folders by numeric version, highest first (10 before 9.6).
func sortPGDirsByVersion(dirs []string) {
	slices.SortStableFunc(dirs, func(a, b string) int { return slices.Compare(pgDirVersion(b), pgDirVersion(a)) })
}

// pgDirVersion parses the version in the parent of a bin folder: "15", "pgsql-9.6", "postgresql@16".
func pgDirVersion(binDir string) []int {
	name := strings.TrimLeftFunc(filepath.Base(filepath.Dir(binDir)), func(r rune) bool { return r < '0' || r > '9' })
	var version []int
	for _, part := range strings.Split(name, ".") {
		n, err := strconv.Atoi(part)
		if err != nil {
			break
		}
		version = append(version, n)
	}
	return version
}

// pgLog forwards the server's log to w, keeps its tail for error messages and spots the ready line.
type pgLog struct {
	w     io.Writer
	mu    sync.Mutex
	buf   []byte
	ready bool
}

func (l *pgLog) Write(b []byte) (int, error) {
	l.w.Write(b) // never fail: exec would stop draining the pipe and the server would block on it
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, b...)
	l.ready = l.ready || bytes.Contains(l.buf, []byte(pgReadyLine))
	if n := len(l.buf); n > pgLogTailBytes {
		l.buf = append(l.buf[:0], l.buf[n-pgLogTailBytes:]...)
	}
	return len(b), nil
}

func (l *pgLog) sawReady() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ready
}

// tail returns the last few KiB of the log.
func (l *pgLog) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.TrimSpace(string(l.buf))
}

// reachableDataDir returns dir, or, when running as root and the server's user cannot enter dir's
// parents (a checkout under /root, say), a folder of this checkout's own under the temp folder, which
// it can; the second result reports the move.
func reachableDataDir(dir string) (string, bool) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return dir, false
	}
	runAs, err := pgRunAs()
	if err != nil || runAs == nil || runAs.blockedAncestor(filepath.Dir(abs)) == "" {
		return dir, false
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(os.TempDir(), "rolodex-dev-"+hex.EncodeToString(sum[:4])), true
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
	// CREATE DATABASE takes no parameters: the name is quoted as an identifier.
	if _, err := st.db.ExecContext(ctx, `CREATE DATABASE `+quoteIdent(name)); err != nil && pgCode(err) != "42P04" {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// quoteIdent quotes a PostgreSQL identifier.
func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}
