package main

import (
	"context"
	"sync"
)

// Coalescing (issue 34): concurrent retrieves of one company's objects share round trips. A retrieve
// that finds no trip of its company (and expansions) in flight goes out at once, as getObject; those
// arriving meanwhile queue, and go out together as the next trip, one `id = ANY($2)` per SELECT
// (getObjects, expand.go). Nothing waits for a batch to fill, and every statement keeps `company_id = $1`.
//
// It pays. Against the minimal Go + pgx server (../shared/anchors/run-all.sh with ROLODEX_REPO, 100k
// contacts, wrk -c32, 5 interleaved rounds, median of the rounds' ratios): retrieve 1.38x, retrieve+5
// 2.27x, where the tree without it measured 1.03x and 0.94x; `make bench` against that tree
// (BENCH_CONTACTS=100000, 5 paired rounds): retrieve 1.54x, retrieve+5 2.28x. Retrieve+5 gains most:
// five statements a trip, each with its fixed cost, where the minimal server sends one JOIN. At wrk
// -c1 nothing queues. Two trips in flight a company measured 0.85-0.90x of one.

// maxCoalesced bounds the ids of one trip.
const maxCoalesced = 64

// coalescer coalesces the retrieves of one resource: handleGet makes one per route. A key in groups
// has a trip in flight, and its value queues the retrieves behind it.
type coalescer[T any, P object[T]] struct {
	res    *resource
	mu     sync.Mutex
	groups map[coalesceKey][]*coalesceWaiter[T]
}

// coalesceKey is what retrieves must share to share a trip: the company and the expansions.
type coalesceKey struct {
	companyID int64
	exps      string
}

// coalesceWaiter is one retrieve: its id, and its answer, set before done is closed (a trip never
// blocks on a retrieve that gave up).
type coalesceWaiter[T any] struct {
	ctx  context.Context
	id   int64
	done chan struct{}
	v    T
	rel  related
	err  error
}

// newCoalescer returns the coalescer of res's retrieves.
func newCoalescer[T any, P object[T]](res *resource) *coalescer[T, P] {
	return &coalescer[T, P]{res: res, groups: make(map[coalesceKey][]*coalesceWaiter[T])}
}

// get is getObject, coalesced: the company's object id with the objects exps embed in it, or
// errNotFound. A cancelled ctx returns at once; the trip it queued for goes on for the others.
func (c *coalescer[T, P]) get(ctx context.Context, rd reader, companyID, id int64, exps []expansion) (T, related, error) {
	key := coalesceKey{companyID: companyID}
	for _, e := range exps {
		key.exps += e.name + ","
	}
	c.mu.Lock()
	if queue, ok := c.groups[key]; ok { // a trip is in flight: queue for the next
		w := &coalesceWaiter[T]{ctx: ctx, id: id, done: make(chan struct{})}
		c.groups[key] = append(queue, w)
		c.mu.Unlock()
		select {
		case <-w.done:
			return w.v, w.rel, w.err
		case <-ctx.Done():
			return *new(T), related{}, ctx.Err()
		}
	}
	c.groups[key] = nil
	c.mu.Unlock()
	defer c.next(rd, key, exps) // once this trip has returned
	return getObject[T, P](ctx, rd, c.res, companyID, id, exps)
}

// next sends what queued behind key's trip that just returned as one trip, in a goroutine that gives
// each its answer, or ends the group when nothing queued. The trip runs within its first retrieve's
// deadline but without its cancellation: a queued retrieve's giving up harms no other.
func (c *coalescer[T, P]) next(rd reader, key coalesceKey, exps []expansion) {
	c.mu.Lock()
	queue := c.groups[key]
	if len(queue) == 0 {
		delete(c.groups, key)
		c.mu.Unlock()
		return
	}
	n := min(len(queue), maxCoalesced)
	batch := queue[:n:n]
	c.groups[key] = queue[n:]
	c.mu.Unlock()
	go func() {
		ctx := context.WithoutCancel(batch[0].ctx)
		if d, ok := batch[0].ctx.Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, d)
			defer cancel()
		}
		ids := make([]int64, len(batch))
		for i, w := range batch {
			ids[i] = w.id
		}
		objs := make(map[int64]T, len(ids))
		rel, err := getObjects[T, P](ctx, rd, c.res, key.companyID, `= ANY($2)`, ids, exps, func(v P) { objs[v.key()] = *v })
		for _, w := range batch {
			v, found := objs[w.id]
			w.v = v
			w.rel = rel
			w.err = err
			if err == nil && !found {
				w.err = errNotFound
			}
			close(w.done)
		}
		c.next(rd, key, exps)
	}()
}
