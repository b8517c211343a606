package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"sync"
	"testing"
)

// The coalescer's answers through the HTTP stack: under concurrency, with 404s, expansions and two
// companies mixed in, each answer (status, ETag, body) is the one the same request has alone.
func TestCoalescedRetrievesEqualUncoalesced(t *testing.T) {
	type probe struct {
		key, path string
		want      response
	}
	var probes []probe
	for range 2 {
		c := newTestCompany(t)
		org, _ := create(t, c.key, "/v1/organizations", `{"name": "Acme"}`)
		for i := range 6 {
			body := fmt.Sprintf(`{"name":"C%d","countryId":724,"stageId":%d,"assignedToId":%d,"organizationId":%d}`,
				i, sqlContactStage(t, c.id), c.userID, org.id())
			if i%2 == 1 {
				body = fmt.Sprintf(`{"name":"C%d"}`, i)
			}
			p := createPath(t, c.key, "/v1/contacts", body)
			for _, q := range []string{"", "?expand[]=organization&expand[]=country&expand[]=stage&expand[]=assignedTo&expand[]=userCreator", "?expand[]=stage"} {
				probes = append(probes, probe{key: c.key, path: p + q})
			}
		}
		probes = append(probes, probe{key: c.key, path: "/v1/contacts/999999999"},
			probe{key: c.key, path: "/v1/contacts/999999998?expand[]=stage"})
	}
	for i := range probes { // alone: nothing in flight, each goes out by itself
		probes[i].want = call(t, "GET", probes[i].path, probes[i].key, "")
	}
	// Another company's contact is a 404, as one that does not exist is.
	other := probes[len(probes)-3] // the second company's last contact, with expand[]=stage
	probes = append(probes, probe{key: probes[0].key, path: other.path, want: probes[len(probes)-1].want})
	var wg sync.WaitGroup
	errs := make(chan error, 8*len(probes))
	for range 8 {
		for _, p := range probes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := send(nil, testEnv.baseURL, "GET", p.path, p.key, "")
				switch {
				case err != nil:
					errs <- err
				case got.status != p.want.status || !bytes.Equal(noRequestID(got.body), noRequestID(p.want.body)) ||
					got.header.Get("ETag") != p.want.header.Get("ETag"):
					errs <- fmt.Errorf("GET %s = %d %s %s; want %d %s %s", p.path, got.status, got.header.Get("ETag"), got.body,
						p.want.status, p.want.header.Get("ETag"), p.want.body)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// noRequestID is a body without its problem's requestId, which differs from request to request.
func noRequestID(b []byte) []byte { return requestIDMember.ReplaceAll(b, nil) }

var requestIDMember = regexp.MustCompile(`,"requestId":"[^"]*"`)

// gatedReader is store.read with a gate: each trip records its statements' arguments, says it has
// started, and waits for the gate before it goes out. fail makes the trips fail instead.
type gatedReader struct {
	mu      sync.Mutex
	trips   [][]any // the arguments of each trip's first statement
	started chan struct{}
	gate    chan struct{}
	fail    error
}

func newGatedReader() *gatedReader {
	return &gatedReader{started: make(chan struct{}, 100), gate: make(chan struct{})}
}

func (g *gatedReader) read(ctx context.Context, reads ...read) error {
	g.mu.Lock()
	for _, r := range reads {
		g.trips = append(g.trips, r.args)
	}
	g.mu.Unlock()
	g.started <- struct{}{}
	<-g.gate
	if g.fail != nil {
		return g.fail
	}
	return testEnv.st.read(ctx, reads...)
}

// queued waits until n retrieves of the company wait behind its trip in flight.
func (c *coalescer[T, P]) queued(companyID int64, n int) {
	for {
		c.mu.Lock()
		got := len(c.groups[coalesceKey{companyID: companyID}])
		c.mu.Unlock()
		if got >= n {
			return
		}
		runtime.Gosched()
	}
}

type coalescedAnswer struct {
	id  int64
	v   contact
	err error
}

// getAll retrieves ids of the company through c, each in a goroutine, with ctx (nil: its own).
func getAll(c *coalescer[contact, *contact], rd reader, companyID int64, ids []int64, ctxs []context.Context) chan coalescedAnswer {
	out := make(chan coalescedAnswer, len(ids))
	for i, id := range ids {
		ctx := context.Background()
		if ctxs != nil {
			ctx = ctxs[i]
		}
		go func() {
			v, _, err := c.get(ctx, rd, companyID, id, nil)
			out <- coalescedAnswer{id, v, err}
		}()
	}
	return out
}

func contactIDs(t *testing.T, key string, n int) []int64 {
	var ids []int64
	for i := range n {
		o, _ := create(t, key, "/v1/contacts", fmt.Sprintf(`{"name":"C%d"}`, i))
		ids = append(ids, o.id())
	}
	return ids
}

// Retrieves that queue behind a trip go out as the next trip, one statement for all of them, and
// each takes its own row back (or its 404).
func TestCoalescerSendsTheQueueAsOneTrip(t *testing.T) {
	co := newTestCompany(t)
	ids := contactIDs(t, co.key, 5)
	c, g := newCoalescer[contact, *contact](contacts), newGatedReader()
	first := getAll(c, g.read, co.id, ids[:1], nil)
	<-g.started
	rest := append(slices.Clone(ids[1:]), 999999999)
	answers := getAll(c, g.read, co.id, rest, nil)
	c.queued(co.id, len(rest))
	close(g.gate)
	if a := <-first; a.err != nil || a.v.ID != ids[0] {
		t.Errorf("first = %d, %v; want %d", a.v.ID, a.err, ids[0])
	}
	for range rest {
		a := <-answers
		switch {
		case a.id == 999999999 && !errors.Is(a.err, errNotFound):
			t.Errorf("get %d: %v; want errNotFound", a.id, a.err)
		case a.id != 999999999 && (a.err != nil || a.v.ID != a.id):
			t.Errorf("get %d = %d, %v", a.id, a.v.ID, a.err)
		}
	}
	if len(g.trips) != 2 {
		t.Fatalf("%d trips; want 2: %v", len(g.trips), g.trips)
	}
	got := slices.Clone(g.trips[1][1].([]int64))
	slices.Sort(got)
	if !slices.Equal(got, rest) {
		t.Errorf("second trip's ids = %v; want %v", got, rest)
	}
}

// Concurrent retrieves of two companies never share a statement: each trip's $1 is one company,
// and its ids that company's.
func TestCoalescerKeepsCompaniesApart(t *testing.T) {
	a, b := newTestCompany(t), newTestCompany(t)
	idsA, idsB := contactIDs(t, a.key, 4), contactIDs(t, b.key, 4)
	c, g := newCoalescer[contact, *contact](contacts), newGatedReader()
	firstA := getAll(c, g.read, a.id, idsA[:1], nil)
	firstB := getAll(c, g.read, b.id, idsB[:1], nil)
	<-g.started
	<-g.started
	restA := getAll(c, g.read, a.id, idsA[1:], nil)
	restB := getAll(c, g.read, b.id, idsB[1:], nil)
	c.queued(a.id, 3)
	c.queued(b.id, 3)
	close(g.gate)
	for _, ch := range []chan coalescedAnswer{firstA, firstB} {
		if x := <-ch; x.err != nil || x.v.ID != x.id {
			t.Errorf("get %d = %d, %v", x.id, x.v.ID, x.err)
		}
	}
	for _, ch := range []chan coalescedAnswer{restA, restB} {
		for range 3 {
			if x := <-ch; x.err != nil || x.v.ID != x.id {
				t.Errorf("get %d = %d, %v", x.id, x.v.ID, x.err)
			}
		}
	}
	owner := map[int64][]int64{a.id: idsA, b.id: idsB}
	for _, args := range g.trips {
		ids, ok := args[1].([]int64)
		if !ok {
			ids = []int64{args[1].(int64)}
		}
		for _, id := range ids {
			if !slices.Contains(owner[args[0].(int64)], id) {
				t.Errorf("a trip of company %d reads contact %d of another", args[0], id)
			}
		}
	}
	if len(g.trips) != 4 {
		t.Errorf("%d trips; want 4 (two each): %v", len(g.trips), g.trips)
	}
}

// A queued retrieve whose request is cancelled returns at once; the trip it queued for still goes
// out, and answers the others.
func TestCoalescerCancelledRetrieveLeavesTheBatch(t *testing.T) {
	co := newTestCompany(t)
	ids := contactIDs(t, co.key, 4)
	c, g := newCoalescer[contact, *contact](contacts), newGatedReader()
	first := getAll(c, g.read, co.id, ids[:1], nil)
	<-g.started
	cancelled, cancel := context.WithCancel(context.Background())
	ctxs := []context.Context{cancelled, context.Background(), context.Background()}
	answers := getAll(c, g.read, co.id, ids[1:], ctxs)
	c.queued(co.id, 3)
	cancel()
	if a := <-answers; a.id != ids[1] || !errors.Is(a.err, context.Canceled) {
		t.Fatalf("get %d: %v; want the cancelled %d's context.Canceled", a.id, a.err, ids[1])
	}
	close(g.gate)
	<-first
	for range 2 {
		if a := <-answers; a.err != nil || a.v.ID != a.id {
			t.Errorf("get %d = %d, %v", a.id, a.v.ID, a.err)
		}
	}
}

// A trip that fails gives every retrieve in it the error.
func TestCoalescerFailingTripFailsEveryWaiter(t *testing.T) {
	co := newTestCompany(t)
	ids := contactIDs(t, co.key, 4)
	c, g := newCoalescer[contact, *contact](contacts), newGatedReader()
	g.fail = errors.New("connection lost")
	first := getAll(c, g.read, co.id, ids[:1], nil)
	<-g.started
	answers := getAll(c, g.read, co.id, ids[1:], nil)
	c.queued(co.id, 3)
	close(g.gate)
	if a := <-first; !errors.Is(a.err, g.fail) {
		t.Errorf("first: %v; want %v", a.err, g.fail)
	}
	for range 3 {
		if a := <-answers; !errors.Is(a.err, g.fail) {
			t.Errorf("get %d: %v; want %v", a.id, a.err, g.fail)
		}
	}
	if len(g.trips) != 2 {
		t.Errorf("%d trips; want 2", len(g.trips))
	}
}
