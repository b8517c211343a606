//go:build faults

package main

// Webhooks under faults (`make faults`): every event delivered at least once through a server killed
// and a database restarted, and the throughput and delay of deliveries.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hookReceiver is a webhook receiver on 127.0.0.1 that counts the events posted to it by
// Rolodex-Event-Id, and the delay of each first arrival after the event's createdAt (its
// transaction, which commits within milliseconds of it). It takes work over each request.
type hookReceiver struct {
	*httptest.Server
	inFlight atomic.Int64
	mu       sync.Mutex
	got      map[int64]int
	delays   []time.Duration
}

func newHookReceiver(t *testing.T, work time.Duration) *hookReceiver {
	rc := &hookReceiver{got: map[int64]int{}}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.inFlight.Add(1)
		defer rc.inFlight.Add(-1)
		var ev struct{ CreatedAt time.Time }
		id, err := strconv.ParseInt(r.Header.Get("Rolodex-Event-Id"), 10, 64)
		if err != nil || json.NewDecoder(r.Body).Decode(&ev) != nil {
			http.Error(w, "not an event", http.StatusBadRequest)
			return
		}
		time.Sleep(work)
		rc.mu.Lock()
		if rc.got[id]++; rc.got[id] == 1 {
			rc.delays = append(rc.delays, time.Since(ev.CreatedAt))
		}
		rc.mu.Unlock()
	}))
	t.Cleanup(rc.Close)
	return rc
}

// missing returns how many of ids the receiver never got, and how many it got more than once.
func (rc *hookReceiver) missing(ids []int64) (missing, duplicates int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, id := range ids {
		if rc.got[id] == 0 {
			missing++
		}
	}
	for _, n := range rc.got {
		duplicates += n - 1
	}
	return missing, duplicates
}

// TestFaultsWebhooksAtLeastOnce: under a write load with two endpoints subscribed, a server is
// killed (SIGKILL) while it sends deliveries, and PostgreSQL is stopped and started again; then
// every event of every committed change reaches both endpoints, some more than once.
func TestFaultsWebhooksAtLeastOnce(t *testing.T) {
	db := newFaultDB(t)
	bin := buildServer(t)
	env := []string{"DATABASE_URL=" + db.url, "ROLODEX_RATE_LIMIT=0", "ROLODEX_WEBHOOK_ALLOW_CIDRS=127.0.0.1/32", "ROLODEX_WEBHOOK_BACKOFF=200ms"}
	// api takes the writes and sends no webhooks; sender sends them all, until it is killed.
	api := startProcess(t, bin, nil, append(env, "ROLODEX_WEBHOOK_SLOTS=0")...)
	sender := startProcess(t, bin, nil, env...)
	nc := db.company(t, "Webhook faults")
	receivers := []*hookReceiver{newHookReceiver(t, 20*time.Millisecond), newHookReceiver(t, 20*time.Millisecond)}
	for _, rc := range receivers {
		r, err := send(nil, api.base, "POST", "/v1/webhooks", nc.APIKey, `{"url": "`+rc.URL+`/hooks", "events": ["*"]}`)
		if err != nil || r.status != http.StatusCreated {
			t.Fatalf("POST /v1/webhooks = %d %s (%v)", r.status, r.body, err)
		}
	}

	// The load: contacts created, and each changed once.
	loadStarted := time.Now()
	lr := newLoadResult()
	var stop atomic.Bool
	var wg sync.WaitGroup
	var seq atomic.Int64
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				if id := lr.createContact(http.DefaultClient, api.base, nc.APIKey, "hooked "+strconv.FormatInt(seq.Add(1), 10)); id != "" {
					send(nil, api.base, "PATCH", "/v1/contacts/"+id, nc.APIKey, `{"city":"Lisboa"}`)
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	time.Sleep(2 * time.Second)
	for deadline := time.Now().Add(10 * time.Second); receivers[0].inFlight.Load()+receivers[1].inFlight.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no delivery under way in 10s\n%s", sender.log.String())
		}
	}
	if err := sender.cmd.Process.Kill(); err != nil { // SIGKILL, with deliveries under way
		t.Fatal(err)
	}
	killed := time.Now()
	senders := []*process{startProcess(t, bin, nil, env...), startProcess(t, bin, nil, env...)} // two share the work from now on
	time.Sleep(2 * time.Second)

	db.restart(t, 4*time.Second, nil)
	time.Sleep(4 * time.Second)
	stop.Store(true)
	wg.Wait()
	loadEnded := time.Now()

	// Every committed change has its event (in its transaction): each must reach both endpoints.
	st, err := openStore(dbConfig{url: db.pg.URL("postgres"), maxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var ids []int64
	created := map[string]bool{}
	rows, err := st.db.Query(`SELECT id, type, object::json->>'id' FROM events WHERE company_id = $1`, nc.CompanyID)
	for err == nil && rows.Next() {
		var id int64
		var typ, object string
		if err = rows.Scan(&id, &typ, &object); typ == "contact.created" {
			created[object] = true
		}
		ids = append(ids, id)
	}
	if err != nil || rows.Err() != nil {
		t.Fatalf("events: %v %v", err, rows.Err())
	}
	rows.Close()
	for id := range lr.acked {
		if !created[id] {
			t.Errorf("contact %s was acknowledged and has no contact.created event", id)
		}
	}
	// Deliveries whose sender was killed, or could not record them while the database was away, are
	// sent again once their lease runs out (30 s): then each is recorded delivered.
	var missing, duplicates, undelivered int
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		missing, duplicates = 0, 0
		for _, rc := range receivers {
			m, d := rc.missing(ids)
			missing, duplicates = missing+m, duplicates+d
		}
		err := st.db.QueryRow(`SELECT count(*) FROM webhook_deliveries WHERE company_id = $1 AND status <> 'delivered'`, nc.CompanyID).Scan(&undelivered)
		if err == nil && missing == 0 && undelivered == 0 || time.Now().After(deadline) {
			break
		}
	}
	drained := time.Since(loadEnded)
	if missing > 0 || undelivered > 0 {
		t.Errorf("%d of %d deliveries (%d events to 2 endpoints) never arrived; %d not recorded delivered\nsenders' logs:\n%s\n%s",
			missing, 2*len(ids), len(ids), undelivered, senders[0].log.String(), senders[1].log.String())
	}
	for s, n := range lr.byStatus {
		if s != http.StatusCreated && s != http.StatusServiceUnavailable {
			t.Errorf("%d POST answers with status %d; want only 201 and 503", n, s)
		}
	}
	t.Logf("webhook faults: %d events (%d contacts acknowledged; POST answers %v, %d without one) to 2 endpoints; "+
		"the sender killed %v into the load, PostgreSQL restarted; every delivery arrived and was recorded %v after the load ended; %d duplicates",
		len(ids), len(lr.acked), lr.byStatus, len(lr.errs), killed.Sub(loadStarted).Round(time.Millisecond), drained.Round(time.Millisecond), duplicates)
}

// TestWebhookThroughput measures how fast 1,000 changes reach 4 endpoints, and the delay from a
// change's commit to its delivery (`make faults`: a figure, not a limit).
func TestWebhookThroughput(t *testing.T) {
	db := newFaultDB(t)
	serverLog := &syncBuffer{}
	base := startServer(t, map[string]string{"DATABASE_URL": db.url, "ROLODEX_RATE_LIMIT": "0", "ROLODEX_WEBHOOK_ALLOW_CIDRS": "127.0.0.1/32"}, serverLog)
	nc := db.company(t, "Webhook throughput")
	var receivers []*hookReceiver
	for range 4 {
		rc := newHookReceiver(t, 0)
		receivers = append(receivers, rc)
		r := callAt(t, nil, base, "POST", "/v1/webhooks", nc.APIKey, `{"url": "`+rc.URL+`", "events": ["contact.*"]}`)
		wantStatus(t, r, http.StatusCreated)
	}
	// delays waits for n deliveries in all, then returns their delays, sorted, and forgets them.
	delays := func(n int) []time.Duration {
		var ds []time.Duration
		for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
			ds = ds[:0]
			for _, rc := range receivers {
				rc.mu.Lock()
				ds = append(ds, rc.delays...)
				rc.mu.Unlock()
			}
			if len(ds) >= n || time.Now().After(deadline) {
				break
			}
		}
		if len(ds) < n {
			t.Fatalf("%d of %d deliveries arrived\n%s", len(ds), n, serverLog.String())
		}
		for _, rc := range receivers {
			rc.mu.Lock()
			rc.delays = nil
			rc.mu.Unlock()
		}
		slices.Sort(ds)
		return ds
	}

	// 1,000 changes as fast as 8 writers go.
	const changes, writers = 1000, 8
	start := time.Now()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range changes / writers {
				r, err := send(nil, base, "POST", "/v1/contacts", nc.APIKey, fmt.Sprintf(`{"name": "W%d %d"}`, w, i))
				if err != nil || r.status != http.StatusCreated {
					t.Errorf("POST /v1/contacts = %d %s (%v)", r.status, r.body, err)
				}
			}
		})
	}
	wg.Wait()
	written := time.Since(start)
	burst := delays(4 * changes)
	all := time.Since(start)
	t.Logf("webhook throughput: %d changes written in %v, their %d deliveries to 4 endpoints all arrived %v after the first write (%.0f a second); "+
		"delay from commit to delivery: median %v, 95th percentile %v, most %v",
		changes, written.Round(time.Millisecond), len(burst), all.Round(time.Millisecond), float64(len(burst))/all.Seconds(),
		burst[len(burst)/2].Round(time.Millisecond), burst[len(burst)*95/100].Round(time.Millisecond), burst[len(burst)-1].Round(time.Millisecond))

	// Then 100 more at 20 a second: the delay when deliveries do not queue.
	for i := range 100 {
		wantStatus(t, callAt(t, nil, base, "POST", "/v1/contacts", nc.APIKey, fmt.Sprintf(`{"name": "Paced %d"}`, i)), http.StatusCreated)
		time.Sleep(50 * time.Millisecond)
	}
	paced := delays(4 * 100)
	t.Logf("webhook delay at 20 changes a second to 4 endpoints: median %v, 95th percentile %v, most %v",
		paced[len(paced)/2].Round(time.Millisecond), paced[len(paced)*95/100].Round(time.Millisecond), paced[len(paced)-1].Round(time.Millisecond))
}
