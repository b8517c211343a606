package main

import (
	"bytes"
	"context"
	"crypto/sha256"
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
	"unicode"
)

const (
	pgReadyLine     = "database system is ready to accept connections"
	pgStartTimeout  = 30 * time.Second
	pgStopTimeout   = 10 * time.Second
	pgStaleTimeout  = 30 * time.Second
	pgPollInterval  = 100 * time.Millisecond
	pgLogTailBytes  = 4 << 10
	pgMaxSocketPath = 100 // sun_path is 104 bytes on macOS, 108 on Linux
)

// errPGPortInUse marks a start-up failure worth retrying on another port.
var errPGPortInUse = errors.New("port already in use")

// localPG is a PostgreSQL server started by this process from the binaries on the machine.
type localPG struct {
	cmd      *exec.Cmd
	port     int
	log      *pgLog
	exited   chan struct{} // closed once cmd.Wait has returned
	waitErr  error         // result of cmd.Wait; read only after exited is closed
	stopOnce sync.Once
	stopErr  error
}

// pgBinaries holds absolute paths of the PostgreSQL programs; pgCtl and pgIsReady may be empty.
type pgBinaries struct {
	initdb, postgres, pgCtl, pgIsReady string
}

// pgUser is the unprivileged account the server runs as when this process is root.
type pgUser struct {
	name     string
	uid, gid uint32
}

// startLocalPG starts (initialising on first use) a PostgreSQL server whose data lives in dir/data,
// listening on 127.0.0.1 on a free port, with superuser "postgres" and trust auth on loopback only.
// logw receives the server's own log output (may be io.Discard). fast=true turns off fsync,
// synchronous_commit and full_page_writes (for throw-away test clusters only).
// It returns when the server accepts connections, or an error that says what to install when no
// PostgreSQL binaries are found. ctx bounds the start-up only, not the server's lifetime.
func startLocalPG(ctx context.Context, dir string, logw io.Writer, fast bool) (*localPG, error) {
	bins, err := findPGBinaries()
	if err != nil {
		return nil, err
	}
	// Children run with cwd=dir, so every path handed to them must be absolute.
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("postgres dir: %w", err)
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
	stopStalePG(ctx, bins, dir, dataDir, runAs)
	if logw == nil {
		logw = io.Discard
	}
	p, err := launchPG(ctx, bins, dir, runAs, logw, fast)
	if errors.Is(err, errPGPortInUse) {
		// Another process grabbed the port between freePort and the server's bind.
		p, err = launchPG(ctx, bins, dir, runAs, logw, fast)
	}
	return p, err
}

// URL returns a connection URL for database dbname on this server (postgres://postgres@127.0.0.1:PORT/dbname?sslmode=disable).
func (p *localPG) URL(dbname string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.port, url.PathEscape(dbname))
}

// Stop shuts the server down (fast mode) and waits for it to exit; safe to call twice.
// Later calls return the first call's result.
func (p *localPG) Stop() error {
	p.stopOnce.Do(func() { p.stopErr = p.stop() })
	return p.stopErr
}

func (p *localPG) stop() error {
	select {
	case <-p.exited:
		return p.exitErr()
	default:
	}
	// SIGINT is PostgreSQL's "fast" shutdown: abort sessions, checkpoint, exit.
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop postgres: %w", err)
	}
	timer := time.NewTimer(pgStopTimeout)
	defer timer.Stop()
	select {
	case <-p.exited:
		return p.exitErr()
	case <-timer.C:
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("stop postgres: no shutdown within %v, killed it; log:\n%s", pgStopTimeout, p.log.tail())
	}
}

func (p *localPG) exitErr() error {
	if p.waitErr != nil {
		return fmt.Errorf("postgres exited: %w; log:\n%s", p.waitErr, p.log.tail())
	}
	return nil
}

// launchPG starts the postgres process on a fresh port and waits until it is ready.
func launchPG(ctx context.Context, bins pgBinaries, dir string, runAs *pgUser, logw io.Writer, fast bool) (*localPG, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p := &localPG{port: port, log: &pgLog{w: logw}, exited: make(chan struct{})}
	cmd := exec.Command(bins.postgres, pgServerArgs(dir, port, fast)...)
	configurePGChild(cmd, dir, runAs)
	// One writer for both streams makes exec copy them with a single goroutine.
	cmd.Stdout, cmd.Stderr = p.log, p.log
	// Backends inherit the log pipe; don't let Wait hang on them after the postmaster is gone.
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start postgres%s: %w", runAs.describe(dir), err)
	}
	p.cmd = cmd
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	if err := p.waitReady(ctx, bins.pgIsReady); err != nil {
		_ = p.Stop()
		return nil, err
	}
	return p, nil
}

func pgServerArgs(dir string, port int, fast bool) []string {
	args := []string{
		"-D", filepath.Join(dir, "data"),
		"-p", strconv.Itoa(port),
		"-k", pgSocketDir(dir),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "max_connections=200",
		// Keep the log on stderr (and so in logw) even if postgresql.conf was edited.
		"-c", "logging_collector=off",
	}
	if fast {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	return args
}

// pgSocketDir returns dir, or "" (no unix socket, TCP only) when the socket path would be too long.
func pgSocketDir(dir string) string {
	if len(dir)+len("/.s.PGSQL.65535") > pgMaxSocketPath {
		return ""
	}
	return dir
}

// waitReady returns once the server accepts connections, it exits, ctx ends or the start timeout passes.
func (p *localPG) waitReady(ctx context.Context, pgIsReady string) error {
	timeout := time.NewTimer(pgStartTimeout)
	defer timeout.Stop()
	tick := time.NewTicker(pgPollInterval)
	defer tick.Stop()
	for {
		if p.log.sawReady() || p.pingReady(ctx, pgIsReady) {
			return nil
		}
		select {
		case <-p.exited:
			return p.earlyExitErr()
		case <-ctx.Done():
			return fmt.Errorf("waiting for postgres to start: %w", ctx.Err())
		case <-timeout.C:
			return fmt.Errorf("postgres not ready after %v; log:\n%s", pgStartTimeout, p.log.tail())
		case <-tick.C:
		}
	}
}

// pingReady asks pg_isready; the log watcher covers machines without it.
func (p *localPG) pingReady(ctx context.Context, pgIsReady string) bool {
	if pgIsReady == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	// -U/-d avoid a "role root does not exist" line in the server log.
	cmd := exec.CommandContext(ctx, pgIsReady, "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(p.port),
		"-U", "postgres", "-d", "postgres", "-t", "1")
	return cmd.Run() == nil
}

func (p *localPG) earlyExitErr() error {
	tail := p.log.tail()
	err := fmt.Errorf("postgres exited during start-up (%v); log:\n%s", p.waitErr, tail)
	if strings.Contains(tail, "Address already in use") {
		return fmt.Errorf("%w: %w", errPGPortInUse, err)
	}
	return err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// initPGData runs initdb unless dataDir already holds a cluster.
func initPGData(ctx context.Context, bins pgBinaries, dir, dataDir string, runAs *pgUser, fast bool) error {
	_, err := os.Stat(filepath.Join(dataDir, "PG_VERSION"))
	if err == nil {
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("postgres data dir: %w", err)
	}
	// Text sorts by code point (collation C); lower() and ILIKE know Unicode case (ctype C.UTF-8),
	// where the system has that locale.
	var err2 error
	for _, ctype := range []string{"C.UTF-8", "C"} {
		args := []string{"-D", dataDir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--lc-ctype=" + ctype}
		if fast {
			args = append(args, "--no-sync")
		}
		cmd := exec.CommandContext(ctx, bins.initdb, args...)
		configurePGChild(cmd, dir, runAs)
		out, err := cmd.CombinedOutput()
		if err == nil {
			return nil
		}
		err2 = fmt.Errorf("initdb%s: %w: %s", runAs.describe(dir), err, out)
	}
	return err2
}

// stopStalePG stops a server left running by a previous, killed run on the same data dir.
// Errors are ignored: postgres itself clears a pid file whose process is gone.
func stopStalePG(ctx context.Context, bins pgBinaries, dir, dataDir string, runAs *pgUser) {
	if bins.pgCtl == "" || !pgPIDFileLive(filepath.Join(dataDir, "postmaster.pid")) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, pgStaleTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.pgCtl, "-D", dataDir, "stop", "-m", "fast", "-w", "-t", "20")
	configurePGChild(cmd, dir, runAs)
	_ = cmd.Run()
}

// pgPIDFileLive reports whether the pid in a postmaster.pid names a live process other than us.
// pg_ctl signals that pid blindly, and after a container restart it is often reused by this process.
func pgPIDFileLive(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 || pid == os.Getpid() || pid == os.Getppid() {
		return false
	}
	err = syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// configurePGChild sets cwd, HOME and, when root, the unprivileged user for a PostgreSQL program.
func configurePGChild(cmd *exec.Cmd, dir string, runAs *pgUser) {
	// initdb and postgres stat their cwd and HOME; root's are not reachable by the server user.
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir)
	if runAs != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Credential: &syscall.Credential{Uid: runAs.uid, Gid: runAs.gid},
		}
	}
}

// pgRunAs returns the account to run the server as, or nil to run it as ourselves.
// PostgreSQL refuses to run as root.
func pgRunAs() (*pgUser, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		if u, err := lookupPGUser(name); err == nil {
			return u, nil
		}
	}
	return nil, errors.New(`running as root and neither user "postgres" nor "nobody" exists; PostgreSQL refuses to run as root`)
}

func lookupPGUser(name string) (*pgUser, error) {
	u, err := osuser.Lookup(name)
	if err != nil {
		return nil, err
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %s: uid %q: %w", name, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %s: gid %q: %w", name, u.Gid, err)
	}
	return &pgUser{name: name, uid: uint32(uid), gid: uint32(gid)}, nil
}

// describe names the user in error messages, since most failures as root are permission
// problems; a parent of dir the user cannot enter shows up only as a confusing fork/exec EACCES.
func (u *pgUser) describe(dir string) string {
	if u == nil {
		return ""
	}
	if blocked := u.blockedAncestor(dir); blocked != "" {
		return fmt.Sprintf(" (as user %s, who cannot enter %s: make it searchable, e.g. chmod o+x)", u.name, blocked)
	}
	return fmt.Sprintf(" (as user %s)", u.name)
}

// blockedAncestor returns the first of dir and its parents that u may not search, or "".
// Children get u's primary group only, so owner/group/other bits decide (ACLs aside).
func (u *pgUser) blockedAncestor(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if info, err := os.Stat(d); err == nil && !u.canSearch(info) {
			return d
		}
		if d == filepath.Dir(d) {
			return ""
		}
	}
}

func (u *pgUser) canSearch(info fs.FileInfo) bool {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	perm := info.Mode().Perm()
	switch {
	case st.Uid == u.uid:
		return perm&0o100 != 0
	case st.Gid == u.gid:
		return perm&0o010 != 0
	default:
		return perm&0o001 != 0
	}
}

// preparePGDir creates dir and, when running as root, hands it to the server user.
func preparePGDir(dir string, runAs *pgUser) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("postgres dir: %w", err)
	}
	if runAs == nil {
		return nil
	}
	// os.MkdirTemp makes 0700 root-owned dirs; the server user must enter dir and put its socket there.
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("postgres dir: %w", err)
	}
	if err := os.Chown(dir, int(runAs.uid), int(runAs.gid)); err != nil {
		return fmt.Errorf("postgres dir: %w", err)
	}
	return chownPGData(filepath.Join(dir, "data"), runAs)
}

// chownPGData gives an existing data dir to the server user, e.g. one made by another account.
func chownPGData(dataDir string, runAs *pgUser) error {
	info, err := os.Stat(dataDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("postgres data dir: %w", err)
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Uid == runAs.uid {
		return nil
	}
	err = filepath.WalkDir(dataDir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, int(runAs.uid), int(runAs.gid))
	})
	if err != nil {
		return fmt.Errorf("chown postgres data dir: %w", err)
	}
	return nil
}

// findPGBinaries looks on PATH first, then in the usual versioned install dirs, highest version first.
func findPGBinaries() (pgBinaries, error) {
	return findPGBinariesIn(filepath.SplitList(os.Getenv("PATH")), pgVersionedBinDirs())
}

func findPGBinariesIn(pathDirs, installDirs []string) (pgBinaries, error) {
	if b, ok := pgBinariesOnPath(pathDirs); ok {
		return b, nil
	}
	for _, dir := range installDirs {
		if b, ok := pgBinariesInDir(dir); ok {
			return b, nil
		}
	}
	return pgBinaries{}, errors.New(`no PostgreSQL server binaries found (initdb, postgres): ` +
		`install them with "sudo apt-get install postgresql" (Debian/Ubuntu) or set DATABASE_URL`)
}

// pgBinariesOnPath finds initdb and postgres on PATH and the helpers next to the real postgres,
// since PATH often holds only symlinks (e.g. /usr/local/bin/postgres -> /usr/lib/postgresql/15/bin/postgres).
func pgBinariesOnPath(pathDirs []string) (pgBinaries, bool) {
	b := pgBinaries{initdb: findExecutable(pathDirs, "initdb"), postgres: findExecutable(pathDirs, "postgres")}
	if b.initdb == "" || b.postgres == "" {
		return pgBinaries{}, false
	}
	dirs := []string{filepath.Dir(b.postgres)}
	if real, err := filepath.EvalSymlinks(b.postgres); err == nil {
		dirs = append([]string{filepath.Dir(real)}, dirs...)
	}
	b.pgCtl = findExecutable(dirs, "pg_ctl")
	b.pgIsReady = findExecutable(dirs, "pg_isready")
	return b, true
}

func pgBinariesInDir(dir string) (pgBinaries, bool) {
	dirs := []string{dir}
	b := pgBinaries{
		initdb:    findExecutable(dirs, "initdb"),
		postgres:  findExecutable(dirs, "postgres"),
		pgCtl:     findExecutable(dirs, "pg_ctl"),
		pgIsReady: findExecutable(dirs, "pg_isready"),
	}
	return b, b.initdb != "" && b.postgres != ""
}

// findExecutable returns the absolute path of the first executable file called name in dirs, or "".
func findExecutable(dirs []string, name string) string {
	for _, dir := range dirs {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // relative PATH entries would resolve against the child's cwd
		}
		path := filepath.Join(dir, name)
		if info, err := os.Stat(path); err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0 {
			return path
		}
	}
	return ""
}

// pgVersionedBinDirs lists installed server bin dirs, highest version first, then unversioned ones.
func pgVersionedBinDirs() []string {
	var dirs []string
	for _, pattern := range []string{
		"/usr/lib/postgresql/*/bin",
		"/usr/pgsql-*/bin",
		"/usr/local/opt/postgresql*/bin",
		"/opt/homebrew/opt/postgresql*/bin",
	} {
		matches, _ := filepath.Glob(pattern) // only ErrBadPattern, impossible for constants
		dirs = append(dirs, matches...)
	}
	sortPGDirsByVersion(dirs)
	return append(dirs, "/opt/homebrew/bin", "/usr/local/bin")
}

// sortPGDirsByVersion sorts .../<version>/bin dirs by numeric version, highest first (10 before 9.6).
func sortPGDirsByVersion(dirs []string) {
	slices.SortStableFunc(dirs, func(a, b string) int {
		return slices.Compare(pgDirVersion(b), pgDirVersion(a))
	})
}

// pgDirVersion parses the version in the parent of a bin dir: "15", "pgsql-9.6", "postgresql@16".
func pgDirVersion(binDir string) []int {
	name := filepath.Base(filepath.Dir(binDir))
	name = strings.TrimLeftFunc(name, func(r rune) bool { return !unicode.IsDigit(r) })
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

// pgLog forwards the server log to w, keeps its tail for error messages and spots the ready line.
type pgLog struct {
	w     io.Writer
	mu    sync.Mutex
	buf   []byte
	ready bool
}

func (l *pgLog) Write(b []byte) (int, error) {
	// Never report a sink error: exec would stop draining the pipe and the server would block on it.
	_, _ = l.w.Write(b)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, b...)
	if !l.ready && bytes.Contains(l.buf, []byte(pgReadyLine)) {
		l.ready = true
	}
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

// tail returns the last few KiB of the log, starting at a line boundary.
func (l *pgLog) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := string(l.buf)
	if len(l.buf) == pgLogTailBytes {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	return strings.TrimSpace(s)
}

// reachableDataDir returns dir, or, when running as root and the server user cannot enter dir's
// parents (a checkout under /root, say), a folder of this checkout's own under the temp dir, which it
// can. The second result reports the move.
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
