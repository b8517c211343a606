//go:build faults

package main

// Long runs, outside plain `go test`: a database that stops and comes back under a write load
// (`make faults`), and a steady mixed load for SOAK_TIME (`make soak`).

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// faultDB is a PostgreSQL of the test's own, with fsync on (a commit is a commit), behind a proxy
// so that servers keep one DATABASE_URL while it stops and starts again; it is removed when the
// test ends.
type faultDB struct {
	dir   string
	pg    *localPG
	proxy *dbProxy
	url   string // through the proxy
}

func newFaultDB(t *testing.T) *faultDB {
	db := &faultDB{dir: pgTestDir(t)}
	var err error
	if db.pg, err = startLocalPG(context.Background(), db.dir, false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.pg.Stop() })
	db.proxy, db.url = newDBProxy(t, db.pg.URL("postgres"))
	return db
}

// company creates a company in the database.
func (db *faultDB) company(t *testing.T, name string) newCompany {
	st, err := openStore(dbConfig{url: db.url, maxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	nc, err := st.createCompany(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return nc
}

// restart stops PostgreSQL, waits down, runs whileDown (when not nil), and starts it again behind
// the proxy.
func (db *faultDB) restart(t *testing.T, down time.Duration, whileDown func()) {
	if err := db.pg.Stop(); err != nil {
		t.Fatalf("stop postgres: %v", err)
	}
	time.Sleep(down)
	if whileDown != nil {
		whileDown()
	}
	pg, err := startLocalPG(context.Background(), db.dir, false)
	if err != nil {
		t.Fatalf("restart postgres: %v", err)
	}
	db.pg = pg
	db.proxy.point(fmt.Sprintf("127.0.0.1:%d", pg.port))
}

func TestFaultsDatabaseStopsAndReturnsNoAcknowledgedWriteLost(t *testing.T) {
	db := newFaultDB(t)
	serverLog := &syncBuffer{}
	base := startServer(t, map[string]string{"DATABASE_URL": db.url, "ROLODEX_RATE_LIMIT": "0"}, serverLog)
	nc := db.company(t, "Faults")

	lr := newLoadResult()
	var seq atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	// One more writer renames a contact of its own over and over: at the end the stored name must be
	// the last one acknowledged, or one sent after it whose answer was lost.
	r, err := send(nil, base, "POST", "/v1/contacts", nc.APIKey, `{"name":"renamed 0"}`)
	if err != nil || r.status != http.StatusCreated {
		t.Fatalf("POST /v1/contacts = %d, %v", r.status, err)
	}
	var renamed struct{ ID string }
	json.Unmarshal(r.body, &renamed)
	patchStatus := map[int]int{} // written by the renamer alone, read once it is done
	var patchAcked, patchSent atomic.Int64
	wg.Go(func() {
		for n := int64(1); !stop.Load(); n++ {
			patchSent.Store(n)
			code := -1 // no answer
			if r, err := send(nil, base, "PATCH", "/v1/contacts/"+renamed.ID, nc.APIKey, fmt.Sprintf(`{"name":"renamed %d"}`, n)); err == nil {
				code = r.status
			}
			patchStatus[code]++
			if code == http.StatusOK {
				patchAcked.Store(n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				lr.createContact(http.DefaultClient, base, nc.APIKey, "fault "+strconv.FormatInt(seq.Add(1), 10))
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	// Two more create with an Idempotency-Key each; at the end every key is sent again.
	type answered struct {
		status int // -1: no answer
		body   []byte
	}
	var keyedMu sync.Mutex
	keyed := map[string]answered{}
	for range 2 {
		wg.Go(func() {
			for !stop.Load() {
				k := "keyed " + strconv.FormatInt(seq.Add(1), 10)
				r, err := send(nil, base, "POST", "/v1/contacts", nc.APIKey, `{"name":"`+k+`"}`, "Idempotency-Key", k)
				if err != nil {
					r.status = -1
				}
				keyedMu.Lock()
				keyed[k] = answered{r.status, r.body}
				keyedMu.Unlock()
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	status := func(path string) int { r, _ := send(nil, base, "GET", path, "", ""); return r.status }
	created := func() int {
		lr.mu.Lock()
		defer lr.mu.Unlock()
		return lr.byStatus[http.StatusCreated]
	}
	time.Sleep(3 * time.Second)
	beforeStop := created()

	down := time.Now()
	var readyWhileDown, during503 int
	db.restart(t, 6*time.Second, func() { // past the key cache: authentication needs the database too
		readyWhileDown = status("/readyz")
		lr.mu.Lock()
		during503 = lr.byStatus[http.StatusServiceUnavailable]
		lr.mu.Unlock()
	})
	up := time.Now()
	patchedAtRestart, createdAtRestart := patchAcked.Load(), created()
	var recovered time.Duration
	for time.Since(up) < 30*time.Second {
		if created() > createdAtRestart && status("/readyz") == http.StatusOK {
			recovered = time.Since(up)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	stop.Store(true)
	wg.Wait()

	if recovered == 0 {
		t.Fatalf("no 201 and ready within 30s of the database's return; the server did not recover by itself\n%s", serverLog.String())
	}
	if alive := status("/healthz"); alive != http.StatusOK || readyWhileDown != http.StatusServiceUnavailable || during503 == 0 {
		t.Errorf("GET /healthz after the fault = %d, GET /readyz while the database was away = %d, %d 503s meanwhile; want 200, 503, some",
			alive, readyWhileDown, during503)
	}
	for s, n := range lr.byStatus {
		if s != http.StatusCreated && s != http.StatusServiceUnavailable {
			t.Errorf("%d POST answers with status %d; want only 201 and 503", n, s)
		}
	}
	for s, n := range patchStatus {
		if s != http.StatusOK && s != http.StatusServiceUnavailable {
			t.Errorf("%d PATCH answers with status %d; want only 200 and 503 (-1: no answer)", n, s)
		}
	}
	if len(lr.errs) > 0 || strings.Contains(serverLog.String(), `"level":"ERROR"`) {
		t.Errorf("%d requests got no proper answer (%q), or the server logged errors:\n%s", len(lr.errs), lr.errs, serverLog.String())
	}
	keyedStatus, replayed := map[int]int{}, 0
	for k, first := range keyed {
		keyedStatus[first.status]++
		r, err := send(nil, base, "POST", "/v1/contacts", nc.APIKey, `{"name":"`+k+`"}`, "Idempotency-Key", k)
		switch {
		case err != nil || r.status != http.StatusCreated:
			t.Errorf("POST with Idempotency-Key %q again = %d %s (%v); want 201", k, r.status, r.body, err)
		case first.status == http.StatusCreated && !bytes.Equal(r.body, first.body):
			t.Errorf("POST with Idempotency-Key %q again answered %s; first %s", k, r.body, first.body)
		case r.header.Get("Idempotent-Replayed") == "true":
			replayed++
		}
	}
	for s, n := range keyedStatus {
		if s != http.StatusCreated && s != http.StatusServiceUnavailable && s != -1 {
			t.Errorf("%d keyed POST answers with status %d; want only 201 and 503 (-1: no answer)", n, s)
		}
	}
	stored := storedContacts(t, db.pg.URL("postgres"), nc.CompanyID)
	perKey := map[string]int{}
	for _, name := range stored {
		perKey[name]++
	}
	for k := range keyed {
		if perKey[k] != 1 {
			t.Errorf("%d contacts of Idempotency-Key %q; want 1", perKey[k], k)
		}
	}
	lost := 0
	for id, name := range lr.acked {
		if stored[id] != name {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged contacts are not in the database", lost, len(lr.acked))
	}
	var last int64
	fmt.Sscanf(stored[renamed.ID], "renamed %d", &last)
	if last < patchAcked.Load() || last > patchSent.Load() {
		t.Errorf("the renamed contact is stored as %q; want the last name acknowledged (renamed %d) or one sent after it (up to %d)",
			stored[renamed.ID], patchAcked.Load(), patchSent.Load())
	}
	if patchAcked.Load() <= patchedAtRestart {
		t.Errorf("no PATCH acknowledged after the database's return (last %d)", patchAcked.Load())
	}
	t.Logf("faults: answers %v; 201 before the stop %d; database away %v; recovered %v after its return; "+
		"%d acknowledged, %d stored, %d lost; PATCH answers %v, the last acknowledged %d, stored %d; "+
		"keyed POST answers %v, each key sent again: %d replayed, %d run anew, none twice",
		lr.byStatus, beforeStop, up.Sub(down).Round(time.Millisecond), recovered.Round(time.Millisecond),
		len(lr.acked), len(stored), lost, patchStatus, patchAcked.Load(), last, keyedStatus, replayed, len(keyed)-replayed)
}

// errorLines counts the log lines of level ERROR (slog writes one line a Write) and drops the rest.
type errorLines struct{ n atomic.Int64 }

func (e *errorLines) Write(p []byte) (int, error) {
	if strings.Contains(string(p), `"level":"ERROR"`) {
		e.n.Add(1)
	}
	return len(p), nil
}

// settled is the goroutine count and resident set size (KiB) once idle connections are closed and
// memory returned.
func settled(t *testing.T, client *http.Client) (goroutines, rss int) {
	client.CloseIdleConnections()
	time.Sleep(500 * time.Millisecond) // server connections see the close
	debug.FreeOSMemory()
	b, err := os.ReadFile("/proc/self/status")
	if _, v, ok := strings.Cut(string(b), "VmRSS:"); err == nil && ok {
		fmt.Sscan(v, &rss)
	}
	if rss == 0 {
		t.Fatalf("no VmRSS in /proc/self/status (%v)", err)
	}
	return runtime.NumGoroutine(), rss
}

// TestSoak runs a mixed load for SOAK_TIME (default 60s): every answer is one the load asks for, and
// goroutines and memory come back to where they started.
func TestSoak(t *testing.T) {
	d, err := time.ParseDuration(cmp.Or(os.Getenv("SOAK_TIME"), "60s"))
	if err != nil {
		t.Fatalf("SOAK_TIME: %v", err)
	}
	var errorLog errorLines // a soak's access log would be most of its memory
	base := startServer(t, map[string]string{"ROLODEX_RATE_LIMIT": "0"}, &errorLog)
	c := newTestCompany(t)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	// Warm up every path once, so that pools, caches and prepared statements exist at the start.
	soakRound(t, client, base, c.key, 0)
	g0, rss0 := settled(t, client)

	var mu sync.Mutex
	statuses, total := map[int]int{}, 0
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() {
			for i := 0; time.Now().Before(end); i++ {
				got := soakRound(t, client, base, c.key, w*1_000_000+i)
				mu.Lock()
				for _, s := range got {
					statuses[s]++
				}
				total += len(got)
				mu.Unlock()
				time.Sleep(10 * time.Millisecond) // leave CPU to the others on the machine
			}
		})
	}
	wg.Wait()
	g1, rss1 := settled(t, client)
	t.Logf("soak %v: %d requests (%.0f/s) by status %v; goroutines %d -> %d; RSS %d KiB -> %d KiB",
		d, total, float64(total)/d.Seconds(), statuses, g0, g1, rss0, rss1)
	for s, n := range statuses { // the 404s and 400s are the round's on purpose
		if s != http.StatusOK && s != http.StatusCreated && s != http.StatusNoContent && s != http.StatusNotFound && s != http.StatusBadRequest {
			t.Errorf("%d answers with status %d", n, s)
		}
	}
	if g1 > g0+5 {
		t.Errorf("goroutines %d at the end, %d at the start; want back to the start (±5)", g1, g0)
	}
	if rss1 > rss0+rss0/4+16<<10 {
		t.Errorf("RSS %d KiB at the end, %d KiB at the start; want within 25%% + 16 MiB", rss1, rss0)
	}
	if errorLog.n.Load() > 0 {
		t.Errorf("the server logged %d errors during the soak", errorLog.n.Load())
	}
}

// soakRound is one client's round of a realistic mix: create, read, list, patch, count, delete,
// business, a 404 and a 400, some with gzip. It returns the statuses.
func soakRound(t *testing.T, client *http.Client, base, key string, i int) []int {
	var out []int
	do := func(method, path, body string, hdr ...string) []byte {
		r := callAt(t, client, base, method, path, key, body, hdr...)
		out = append(out, r.status)
		return r.body
	}
	var c struct{ ID string }
	json.Unmarshal(do("POST", "/v1/contacts?expand[]=stage", fmt.Sprintf(`{"name":"Soak %d","email":"s%d@example.com"}`, i, i)), &c)
	do("GET", "/v1/contacts/"+c.ID+"?expand[]=organization&expand[]=userCreator", "")
	do("PATCH", "/v1/contacts/"+c.ID, `{"jobTitle":"Tester"}`)
	do("GET", "/v1/contacts?limit=50", "", "Accept-Encoding", "gzip")
	do("GET", "/v1/contacts/count", "")
	var b struct{ ID int64 }
	json.Unmarshal(do("POST", "/v1/business", `{"title":"Soak deal","value":12.5}`), &b)
	do("GET", "/v1/business?expand[]=stage", "", "Accept-Encoding", "gzip")
	do("DELETE", "/v1/business/"+strconv.FormatInt(b.ID, 10), "")
	do("DELETE", "/v1/contacts/"+c.ID, "")
	do("GET", "/v1/contacts/"+c.ID, "")   // 404
	do("GET", "/v1/contacts?limit=0", "") // 400
	return out
}
