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
	p, err := startLocalPG(ctx, dir, t.Output(), true) // its log shows for failing or -v runs
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

// pgQuery runs the statements before the last of queries on p's postgres database, then the last,
// and returns its one text value.
func pgQuery(t *testing.T, p *localPG, queries ...string) string {
	t.Helper()
	db, err := sql.Open("pgx", p.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range queries[:len(queries)-1] {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var s string
	if err := db.QueryRow(queries[len(queries)-1]).Scan(&s); err != nil {
		t.Fatalf("%s: %v", queries[len(queries)-1], err)
	}
	return s
}

// A local PostgreSQL honours its context, starts, keeps its data across a stop and a start, replaces a stale server left
// running on its folder, and ignores a leftover pid file.
func TestLocalPGLifecycle(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if p, err := startLocalPG(ctx, pgTestDir(t), nil, true); err == nil {
		p.Stop()
		t.Fatal("startLocalPG with a cancelled context succeeded")
	}
	dir := pgTestDir(t)
	p := startTestPG(t, dir)
	if !regexp.MustCompile(`^postgres://postgres@127\.0\.0\.1:\d+/rolodex\?sslmode=disable$`).MatchString(p.URL("rolodex")) {
		t.Errorf("URL = %q", p.URL("rolodex"))
	}
	got := pgQuery(t, p, "CREATE TABLE devdb_marker AS SELECT 'first run' AS note",
		"SELECT current_setting('fsync') || ' ' || current_user")
	if got != "off postgres" {
		t.Errorf("fsync and current_user = %q, want off postgres", got)
	}
	if err1, err2 := p.Stop(), p.Stop(); err1 != nil || err2 != nil {
		t.Fatalf("Stop, twice: %v, %v", err1, err2)
	}
	if conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", p.port), time.Second); err == nil {
		conn.Close()
		t.Errorf("port %d still open after Stop", p.port)
	}

	stale := startTestPG(t, dir)
	if got := pgQuery(t, stale, "SELECT note FROM devdb_marker"); got != "first run" {
		t.Errorf("marker = %q, want data kept from the first run", got)
	}
	// A second start on the same folder plays the part of a run after a crash that left the server up.
	p = startTestPG(t, dir)
	select {
	case <-stale.exited:
	case <-time.After(5 * time.Second):
		t.Fatal("stale server still running after a new start on its data dir")
	}

	// After a container restart the old postmaster's pid is often this very process.
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(dir, "data", "postmaster.pid")
	if err := os.WriteFile(pidFile, []byte(fmt.Sprintf("%d\n%s\n", os.Getpid(), filepath.Join(dir, "data"))), 0o600); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(filepath.Dir(pidFile)); err == nil && os.Geteuid() == 0 { // owned as the server would
		st := info.Sys().(*syscall.Stat_t)
		if err := os.Chown(pidFile, int(st.Uid), int(st.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	if got := pgQuery(t, startTestPG(t, dir), "SELECT note FROM devdb_marker"); got != "first run" {
		t.Errorf("marker = %q after a leftover pid file, want the data", got)
	}
}

func TestFindPGBinaries(t *testing.T) {
	t.Parallel()
	if _, err := findPGBinariesIn([]string{t.TempDir()}, []string{t.TempDir()}); err == nil || !strings.Contains(err.Error(), "apt-get install postgresql") {
		t.Errorf("without binaries: err = %v, want the install hint", err)
	}
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
	if want := filepath.Join(root, "postgresql", "15", "bin", "postgres"); err != nil || b.postgres != want || b.pgCtl != "" {
		t.Errorf("findPGBinariesIn = postgres %q, pg_ctl %q, %v; want %q and no pg_ctl", b.postgres, b.pgCtl, err, want)
	}
}

func TestPGDirVersion(t *testing.T) {
	t.Parallel()
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
