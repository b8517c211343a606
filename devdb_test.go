package main

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
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
	p, err := startLocalPG(ctx, dir, testLogWriter{t}, true)
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

// testLogWriter sends the server log to t.Log so it shows up only for failing or -v runs.
type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func openTestPG(t *testing.T, p *localPG) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", p.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func queryString(t *testing.T, db *sql.DB, query string) string {
	t.Helper()
	var s string
	if err := db.QueryRow(query).Scan(&s); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return s
}

func TestLocalPGStartQueryStopRestart(t *testing.T) {
	dir := pgTestDir(t)
	p := startTestPG(t, dir)

	if !regexp.MustCompile(`^postgres://postgres@127\.0\.0\.1:\d+/rolodex\?sslmode=disable$`).MatchString(p.URL("rolodex")) {
		t.Errorf("URL = %q", p.URL("rolodex"))
	}
	conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", p.port), time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	conn.Close()

	db := openTestPG(t, p)
	if got := queryString(t, db, "SELECT 1::text"); got != "1" {
		t.Errorf("SELECT 1 = %q", got)
	}
	if got := queryString(t, db, "SELECT current_setting('fsync')"); got != "off" {
		t.Errorf("fsync = %q, want off", got)
	}
	if got := queryString(t, db, "SELECT current_user::text"); got != "postgres" {
		t.Errorf("current_user = %q, want postgres", got)
	}
	if _, err := db.Exec("CREATE TABLE devdb_marker (note text); INSERT INTO devdb_marker VALUES ('first run')"); err != nil {
		t.Fatal(err)
	}
	db.Close()

	if err := p.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", p.port), time.Second); err == nil {
		conn.Close()
		t.Errorf("port %d still open after Stop", p.port)
	}

	p2 := startTestPG(t, dir)
	db2 := openTestPG(t, p2)
	if got := queryString(t, db2, "SELECT note FROM devdb_marker"); got != "first run" {
		t.Errorf("marker = %q, want data kept from the first run", got)
	}
}

func TestLocalPGStopsStaleServer(t *testing.T) {
	dir := pgTestDir(t)
	stale := startTestPG(t, dir)
	// A second start on the same dir plays the part of a run after a crash that left the server up.
	p := startTestPG(t, dir)
	select {
	case <-stale.exited:
	case <-time.After(5 * time.Second):
		t.Fatal("stale server still running after a new start on its data dir")
	}
	if got := queryString(t, openTestPG(t, p), "SELECT 1::text"); got != "1" {
		t.Errorf("SELECT 1 = %q", got)
	}
}

func TestLocalPGIgnoresLeftoverPIDFile(t *testing.T) {
	dir := pgTestDir(t)
	if err := startTestPG(t, dir).Stop(); err != nil {
		t.Fatal(err)
	}
	// After a container restart the old postmaster's pid is often this very process.
	pidFile := filepath.Join(dir, "data", "postmaster.pid")
	if err := os.WriteFile(pidFile, []byte(fmt.Sprintf("%d\n%s\n", os.Getpid(), filepath.Join(dir, "data"))), 0o600); err != nil {
		t.Fatal(err)
	}
	chownLike(t, pidFile, filepath.Dir(pidFile))
	p := startTestPG(t, dir)
	if got := queryString(t, openTestPG(t, p), "SELECT 1::text"); got != "1" {
		t.Errorf("SELECT 1 = %q", got)
	}
}

// chownLike gives path the owner of ref, as the server would have written path itself.
func chownLike(t *testing.T, path, ref string) {
	t.Helper()
	info, err := os.Stat(ref)
	if err != nil {
		t.Fatal(err)
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 {
		if err := os.Chown(path, int(st.Uid), int(st.Gid)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLocalPGHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p, err := startLocalPG(ctx, pgTestDir(t), nil, true)
	if err == nil {
		p.Stop()
		t.Fatal("startLocalPG with a cancelled context succeeded")
	}
}

func TestFindPGBinariesMissing(t *testing.T) {
	_, err := findPGBinariesIn([]string{t.TempDir()}, []string{t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "apt-get install postgresql") {
		t.Fatalf("err = %v, want install hint", err)
	}
}

func TestFindPGBinariesPrefersHighestVersion(t *testing.T) {
	root := t.TempDir()
	var dirs []string
	for _, v := range []string{"9.6", "15", "10"} {
		dir := filepath.Join(root, "postgresql", v, "bin")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"initdb", "postgres"} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		dirs = append(dirs, dir)
	}
	sortPGDirsByVersion(dirs)
	b, err := findPGBinariesIn(nil, dirs)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "postgresql", "15", "bin", "postgres"); b.postgres != want {
		t.Errorf("postgres = %q, want %q", b.postgres, want)
	}
	if b.pgCtl != "" {
		t.Errorf("pg_ctl = %q, want none", b.pgCtl)
	}
}

func TestPGDirVersion(t *testing.T) {
	for dir, want := range map[string][]int{
		"/usr/lib/postgresql/15/bin":        {15},
		"/usr/pgsql-9.6/bin":                {9, 6},
		"/usr/local/opt/postgresql@16/bin":  {16},
		"/usr/local/opt/postgresql/bin":     nil,
		"/usr/lib/postgresql/10.23beta/bin": {10},
	} {
		if got := pgDirVersion(dir); !slices.Equal(got, want) {
			t.Errorf("pgDirVersion(%q) = %v, want %v", dir, got, want)
		}
	}
}
