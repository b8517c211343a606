package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Shutdown, database faults and a soak run. The shutdown test runs with the suite; the fault test
// and the soak run need ROLODEX_FAULTS=1 and ROLODEX_SOAK=DURATION (`make faults`, `make soak`).

// loadResult counts a load's answers by status, and the contacts acknowledged with 201.
type loadResult struct {
	mu       sync.Mutex
	byStatus map[int]int
	errs     []string
	acked    map[string]string // id: name
}

func newLoadResult() *loadResult {
	return &loadResult{byStatus: map[int]int{}, acked: map[string]string{}}
}

// createContact posts one contact named name and records the answer.
func (lr *loadResult) createContact(client *http.Client, base, key, name string) {
	req, _ := http.NewRequest("POST", base+"/v1/contacts", strings.NewReader(`{"name":"`+name+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", key)
	resp, err := client.Do(req)
	if err != nil {
		lr.mu.Lock()
		lr.errs = append(lr.errs, err.Error())
		lr.mu.Unlock()
		return
	}
	body, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	var c struct{ ID, Name string }
	lr.mu.Lock()
	defer lr.mu.Unlock()
	lr.byStatus[resp.StatusCode]++
	if resp.StatusCode == http.StatusCreated {
		if rerr != nil || json.Unmarshal(body, &c) != nil || c.Name != name {
			lr.errs = append(lr.errs, fmt.Sprintf("201 with a cut or wrong body %q (%v)", body, rerr))
			return
		}
		lr.acked[c.ID] = name
	}
}

// createFaultsContact creates a contact before the fault and returns its id.
func createFaultsContact(t *testing.T, base, key string) string {
	t.Helper()
	r := callAt(t, nil, base, "POST", "/v1/contacts", key, `{"name":"renamed 0"}`)
	var c struct{ ID string }
	if err := json.Unmarshal(r.body, &c); err != nil || r.status != http.StatusCreated {
		t.Fatalf("POST /v1/contacts = %d (%v)", r.status, err)
	}
	return c.ID
}

// storedContacts is the company's contacts by id, read with SQL.
func storedContacts(t *testing.T, dbURL string, companyID int64) map[string]string {
	t.Helper()
	st, err := openStore(dbConfig{url: dbURL, maxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rows, err := st.db.Query(`SELECT id, name FROM contacts WHERE company_id = $1`, companyID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]string{}
	for rows.Next() {
		var id int64
		var name string
		rows.Scan(&id, &name)
		got[strconv.FormatInt(id, 10)] = name
	}
	return got
}

// buildBinary builds rolodex into a temporary folder.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "rolodex")
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	cmd := exec.Command(gobin, "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func TestSIGTERMFinishesRequestsInFlightAndExits0(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	c := newTestCompany(t)
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd := exec.Command(bin, "serve", "-shutdown-timeout", "10s")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+testEnv.dbURL, "ROLODEX_ADDR="+addr, "ROLODEX_RATE_LIMIT=0")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer cmd.Process.Kill()
	base := "http://" + addr
	if err := waitHealthy(base, exited); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}

	// A load of creates, and one slow create whose body is still arriving when SIGTERM comes.
	lr := newLoadResult()
	client := &http.Client{Transport: &http.Transport{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				lr.createContact(client, base, c.key, fmt.Sprintf("load %d-%d", w, i))
			}
		}()
	}
	pr, pw := io.Pipe()
	slow := make(chan response, 1)
	go func() {
		req, _ := http.NewRequest("POST", base+"/v1/contacts", pr)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-api-key", c.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			slow <- response{status: -1, body: []byte(err.Error())}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		slow <- response{status: resp.StatusCode, body: b}
	}()
	pw.Write([]byte(`{"name":`))
	time.Sleep(500 * time.Millisecond) // load runs; the slow request is in flight
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	pw.Write([]byte(`"slow one"}`))
	pw.Close()
	close(stop)
	wg.Wait()

	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit: %v; want status 0\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no exit 30s after SIGTERM\n%s", stderr.String())
	}
	took := time.Since(sent)
	if r := <-slow; r.status != http.StatusCreated {
		t.Errorf("the request in flight at SIGTERM: %d %s; want 201 with its body", r.status, r.body)
	} else {
		var got struct{ ID, Name string }
		json.Unmarshal(r.body, &got)
		lr.acked[got.ID] = got.Name
	}
	// Requests refused after the listener closed never reached a handler; every one that did was
	// answered in full: what the database holds is exactly what was acknowledged.
	stored := storedContacts(t, testEnv.dbURL, c.id)
	if len(stored) != len(lr.acked) {
		t.Errorf("%d contacts stored, %d acknowledged with 201; want the same (an accepted request lost its answer)", len(stored), len(lr.acked))
	}
	for id, name := range lr.acked {
		if stored[id] != name {
			t.Errorf("acknowledged contact %s %q: stored as %q", id, name, stored[id])
		}
	}
	for status, n := range lr.byStatus {
		if status != http.StatusCreated {
			t.Errorf("%d answers with status %d during shutdown; want only 201 (or refused connections)", n, status)
		}
	}
	if !strings.Contains(stderr.String(), `"msg":"stopped"`) {
		t.Errorf("no \"stopped\" log line:\n%s", stderr.String())
	}
	t.Logf("shutdown: %d creates answered 201 (incl. the slow one), %d refused connections, exit %v after SIGTERM",
		len(lr.acked), len(lr.errs), took.Round(time.Millisecond))
}

// pgProxy forwards TCP connections to the current address of a PostgreSQL that restarts on another
// port: the server keeps one DATABASE_URL throughout.
type pgProxy struct {
	ln     net.Listener
	target atomic.Value // string
}

func newPGProxy(t *testing.T, target string) *pgProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pgProxy{ln: ln}
	p.target.Store(target)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return p
}

func (p *pgProxy) forward(c net.Conn) {
	defer c.Close()
	up, err := net.DialTimeout("tcp", p.target.Load().(string), 2*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	go func() { io.Copy(up, c); up.Close() }()
	io.Copy(c, up)
}

func TestFaultsDatabaseStopsAndReturnsNoAcknowledgedWriteLost(t *testing.T) {
	if os.Getenv("ROLODEX_FAULTS") == "" {
		t.Skip("a fault-injection run of ~30s: make faults (ROLODEX_FAULTS=1)")
	}
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "rolodex-faults-pg-") // reachable by the postgres user, unlike t.TempDir
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	pg, err := startLocalPG(ctx, dir, io.Discard, false) // fsync on: a commit is a commit
	if err != nil {
		t.Fatal(err)
	}
	defer func() { pg.Stop() }()
	proxy := newPGProxy(t, fmt.Sprintf("127.0.0.1:%d", pg.port))
	dbURL := "postgres://postgres@" + proxy.ln.Addr().String() + "/postgres?sslmode=disable"
	serverLog := &syncBuffer{}
	base := startServer(t, map[string]string{"DATABASE_URL": dbURL, "ROLODEX_RATE_LIMIT": "0"}, serverLog)
	st, err := openStore(dbConfig{url: dbURL, maxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := st.createCompany(ctx, "Faults")
	st.Close()
	if err != nil {
		t.Fatal(err)
	}

	lr := newLoadResult()
	var seq atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// One more writer renames a contact of its own over and over (PATCH, a transaction of two round
	// trips): at the end the stored name must be the last one acknowledged, or one sent after it
	// whose answer was lost.
	renamed := createFaultsContact(t, base, nc.APIKey)
	var patchMu sync.Mutex
	patchStatus := map[int]int{}
	var patchAcked, patchSent atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := int64(1); ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			patchSent.Store(n)
			code := -1 // no answer
			if r, err := send(nil, base, "PATCH", "/v1/contacts/"+renamed, nc.APIKey, fmt.Sprintf(`{"name":"renamed %d"}`, n)); err == nil {
				code = r.status
			}
			patchMu.Lock()
			patchStatus[code]++
			patchMu.Unlock()
			if code == http.StatusOK {
				patchAcked.Store(n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				lr.createContact(http.DefaultClient, base, nc.APIKey, "fault "+strconv.FormatInt(seq.Add(1), 10))
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	status := func(path string) int {
		resp, err := http.Get(base + path)
		if err != nil {
			return -1
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	time.Sleep(3 * time.Second)
	lr.mu.Lock()
	beforeStop := lr.byStatus[http.StatusCreated]
	lr.mu.Unlock()

	down := time.Now()
	if err := pg.Stop(); err != nil {
		t.Fatalf("stop postgres: %v", err)
	}
	time.Sleep(6 * time.Second) // past the key cache: authentication needs the database too
	readyWhileDown := status("/readyz")
	lr.mu.Lock()
	during503 := lr.byStatus[http.StatusServiceUnavailable]
	lr.mu.Unlock()

	pg, err = startLocalPG(ctx, dir, io.Discard, false)
	if err != nil {
		t.Fatalf("restart postgres: %v", err)
	}
	proxy.target.Store(fmt.Sprintf("127.0.0.1:%d", pg.port))
	up := time.Now()
	patchedAtRestart := patchAcked.Load()
	lr.mu.Lock()
	createdAtRestart := lr.byStatus[http.StatusCreated]
	lr.mu.Unlock()
	var recovered time.Duration
	for time.Since(up) < 30*time.Second {
		lr.mu.Lock()
		n := lr.byStatus[http.StatusCreated]
		lr.mu.Unlock()
		if n > createdAtRestart && status("/readyz") == http.StatusOK {
			recovered = time.Since(up)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()

	if recovered == 0 {
		t.Fatalf("no 201 and ready within 30s of the database's return; the server did not recover by itself\n%s", serverLog.String())
	}
	if status("/healthz") != http.StatusOK {
		t.Error("the server is not alive after the fault")
	}
	if readyWhileDown != http.StatusServiceUnavailable {
		t.Errorf("GET /readyz with the database away = %d; want 503", readyWhileDown)
	}
	if during503 == 0 {
		t.Error("no 503 while the database was away")
	}
	for s, n := range lr.byStatus {
		if s != http.StatusCreated && s != http.StatusServiceUnavailable {
			t.Errorf("%d answers with status %d; want only 201 and 503", n, s)
		}
	}
	if len(lr.errs) > 0 {
		t.Errorf("%d requests got no proper answer, e.g. %s", len(lr.errs), lr.errs[0])
	}
	if strings.Contains(serverLog.String(), `"level":"ERROR"`) {
		t.Errorf("the server logged errors (500s):\n%s", serverLog.String())
	}
	stored := storedContacts(t, pg.URL("postgres"), nc.CompanyID)
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
	fmt.Sscanf(stored[renamed], "renamed %d", &last)
	if last < patchAcked.Load() || last > patchSent.Load() {
		t.Errorf("the renamed contact is stored as %q; want the last name acknowledged (renamed %d) or one sent after it (up to %d)",
			stored[renamed], patchAcked.Load(), patchSent.Load())
	}
	if patchAcked.Load() <= patchedAtRestart {
		t.Errorf("no PATCH acknowledged after the database's return (last %d)", patchAcked.Load())
	}
	for s, n := range patchStatus {
		if s != http.StatusOK && s != http.StatusServiceUnavailable {
			t.Errorf("%d PATCH answers with status %d; want only 200 and 503 (-1: no answer)", n, s)
		}
	}
	t.Logf("faults: %d answers %v; 201 before the stop %d; database away %v; recovered %v after its return; "+
		"%d acknowledged, %d stored, %d lost; PATCH answers %v, the last acknowledged %d, stored %d",
		lr.total(), lr.byStatus, beforeStop, up.Sub(down).Round(time.Millisecond), recovered.Round(time.Millisecond),
		len(lr.acked), len(stored), lost, patchStatus, patchAcked.Load(), last)
}

func (lr *loadResult) total() int {
	n := 0
	for _, c := range lr.byStatus {
		n += c
	}
	return n
}

// rss is this process's resident set size in KiB, from /proc/self/status.
func rss(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// errorLines counts the log lines of level ERROR (slog writes one line a Write) and drops the rest.
type errorLines struct{ n atomic.Int64 }

func (e *errorLines) Write(p []byte) (int, error) {
	if strings.Contains(string(p), `"level":"ERROR"`) {
		e.n.Add(1)
	}
	return len(p), nil
}

// settled is the goroutine count and RSS once idle connections are closed and memory returned.
func settled(t *testing.T, client *http.Client) (int, int) {
	client.CloseIdleConnections()
	time.Sleep(500 * time.Millisecond) // server connections see the close
	debug.FreeOSMemory()
	return runtime.NumGoroutine(), rss(t)
}

func TestSoak(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("ROLODEX_SOAK"))
	if err != nil {
		t.Skip("a soak run: make soak (ROLODEX_SOAK=60s)")
	}
	var errorLog errorLines // a soak's access log would be most of its memory
	base := startServer(t, map[string]string{"ROLODEX_RATE_LIMIT": "1000000"}, &errorLog)
	c := newTestCompany(t)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	// Warm up every path once, so that pools, caches and prepared statements exist at the start.
	soakRound(t, client, base, c.key, 0)
	g0, rss0 := settled(t, client)

	var total atomic.Int64
	statuses := map[int]int{}
	var mu sync.Mutex
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(end); i++ {
				for _, s := range soakRound(t, client, base, c.key, w*1_000_000+i) {
					mu.Lock()
					statuses[s]++
					mu.Unlock()
					total.Add(1)
				}
				time.Sleep(10 * time.Millisecond) // leave CPU to the others on the machine
			}
		}()
	}
	wg.Wait()
	g1, rss1 := settled(t, client)
	non2xx := map[int]int{}
	for s, n := range statuses {
		if s < 200 || s > 299 {
			non2xx[s] = n
		}
	}
	t.Logf("soak %v: %d requests (%.0f/s), non-2xx by status %v; goroutines %d -> %d; RSS %d KiB -> %d KiB",
		d, total.Load(), float64(total.Load())/d.Seconds(), non2xx, g0, g1, rss0, rss1)
	// The expected non-2xx are the 404s and 400s the round asks for on purpose.
	for s := range non2xx {
		if s != http.StatusNotFound && s != http.StatusBadRequest {
			t.Errorf("%d answers with status %d", non2xx[s], s)
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
