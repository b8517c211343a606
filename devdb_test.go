package main

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
)

// pgTestDir returns a fresh temp dir the unprivileged server user can reach.
func pgTestDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() == 0 {
		// t.TempDir nests dir in a 0700 root-owned dir that startLocalPG deliberately leaves alone.
		if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func startTestPG(t *testing.T, dir string) *localPG {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := startLocalPG(ctx, dir, true)
	if err != nil {
		t.Fatalf("startLocalPG: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return p
}

// pgQuery returns the one text value of query q on p's postgres database.
func pgQuery(t *testing.T, p *localPG, q string) string {
	t.Helper()
	db, err := sql.Open("pgx", p.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var s string
	if err := db.QueryRow(q).Scan(&s); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return s
}

// listening reports whether something accepts connections on 127.0.0.1:port.
func listening(port int) bool {
	conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
	if err == nil {
		conn.Close()
	}
	return err == nil
}

// A local PostgreSQL honours its context, starts, logs to its folder, keeps its data across a stop
// and a start, replaces a server left running on its folder, and ignores a leftover pid file.
func TestLocalPGLifecycle(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := startLocalPG(ctx, t.TempDir(), true); os.Geteuid() == 0 && (err == nil || !strings.Contains(err.Error(), "cannot enter")) {
		t.Errorf("as root in t.TempDir, inside a folder of root's alone: err = %v; want it to name the folder", err)
	}
	if p, err := startLocalPG(ctx, pgTestDir(t), true); err == nil {
		p.Stop()
		t.Fatal("startLocalPG with a cancelled context succeeded")
	}
	dir := pgTestDir(t)
	p := startTestPG(t, dir)
	if !regexp.MustCompile(`^postgres://postgres@127\.0\.0\.1:\d+/rolodex\?sslmode=disable$`).MatchString(p.URL("rolodex")) || p.port >= 32000 {
		t.Errorf("URL = %q; want 127.0.0.1 and a port below 32000", p.URL("rolodex"))
	}
	if got := pgQuery(t, p, "SELECT current_setting('fsync') || ' ' || current_user"); got != "off postgres" {
		t.Errorf("fsync and current_user = %q, want off postgres", got)
	}
	if log, _ := os.ReadFile(filepath.Join(dir, "postgres.log")); !strings.Contains(string(log), "ready to accept connections") {
		t.Errorf("postgres.log = %q; want the server's log", log)
	}
	const marker, hasMarker = `first "run"`, `SELECT count(*)::text FROM pg_database WHERE datname = 'first "run"'`
	for range 2 {
		if err := ensureDatabase(context.Background(), p.URL("postgres"), marker); err != nil {
			t.Fatalf("ensureDatabase: %v", err)
		}
	}
	if err1, err2 := p.Stop(), p.Stop(); err1 != nil || err2 != nil || listening(p.port) {
		t.Fatalf("Stop, twice: %v, %v; port %d open after: %v", err1, err2, p.port, listening(p.port))
	}

	stale := startTestPG(t, dir)
	if got := pgQuery(t, stale, hasMarker); got != "1" {
		t.Errorf("marker databases = %s, want the one kept from the first run", got)
	}
	// A second start on the same folder plays the part of a run after a crash that left the server up.
	p = startTestPG(t, dir)
	if listening(stale.port) {
		t.Fatal("stale server still running after a new start on its data dir")
	}
	if err := stale.Stop(); err != nil || !listening(p.port) {
		t.Errorf("Stop on the replaced server = %v, new server up %v; want nil, true", err, listening(p.port))
	}

	// After a container restart the old postmaster's pid is often this very process.
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(dir, "data", "postmaster.pid")
	if err := os.WriteFile(pidFile, []byte(fmt.Sprintf("%d\n%s\n", os.Getpid(), filepath.Join(dir, "data"))), 0o600); err != nil {
		t.Fatal(err)
	}
	if p.runAs != nil { // owned as the server would
		os.Chown(pidFile, int(p.runAs.uid), int(p.runAs.gid))
	}
	if got := pgQuery(t, startTestPG(t, dir), hasMarker); got != "1" {
		t.Errorf("marker databases = %s after a leftover pid file, want the data", got)
	}
}

// The server binaries come from the PATH, else from the install folder of the highest version that
// holds pg_ctl.
func TestFindPGCtl(t *testing.T) {
	t.Parallel()
	if _, err := findPGCtl([]string{t.TempDir()}, filepath.Join(t.TempDir(), "*")); err == nil || !strings.Contains(err.Error(), "apt-get install postgresql") {
		t.Errorf("without binaries: err = %v, want the install hint", err)
	}
	root := t.TempDir()
	for dir, program := range map[string]string{"lib/postgresql/9.6/bin": "pg_ctl", "lib/postgresql/10/bin": "pg_ctl",
		"lib/postgresql/11/bin": "pg_ctl", "lib/postgresql/15/bin": "initdb", "pgsql-12/bin": "pg_ctl", "bin": "pg_ctl"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, dir, program), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	debian, pgdg := filepath.Join(root, "lib/postgresql/*/bin"), filepath.Join(root, "pgsql-*/bin")
	for _, tc := range []struct {
		path     []string
		patterns []string
		want     string
	}{
		{nil, []string{debian}, "lib/postgresql/11/bin"}, // 11, not 9.6; 15 lacks pg_ctl
		{nil, []string{debian, pgdg}, "pgsql-12/bin"},
		{[]string{filepath.Join(root, "lib"), filepath.Join(root, "bin")}, []string{debian}, "bin"},
	} {
		if got, err := findPGCtl(tc.path, tc.patterns...); got != filepath.Join(root, tc.want, "pg_ctl") || err != nil {
			t.Errorf("findPGCtl(%q, %q) = %q, %v; want %s/pg_ctl", tc.path, tc.patterns, got, err, tc.want)
		}
	}
}
