package inproc

import (
	"context"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/bench"
)

// heap-pressure models A-c11: a huge nested aggregation fills a large share
// of the garbage-collected heap with small, pointer-rich buckets while it
// churns through documents, so the collector runs back to back over a
// large live heap and every request pays for it: in CPU taken by the
// collector's workers and in assists charged to its own allocations.
//
// The heap is real and so is the aggregation: the culprit builds nested
// maps of linked 256-byte leaves (the live set) from documents it reads
// into fresh buffers of 0.5 to 1.5 KiB and decodes into fresh field slices
// (garbage). The Go heap is accounted as a
// moirai Memory in MiB: the aggregation uses (Use) the MiB of leaves it
// keeps, frees them (Free) when it ends, and counts every MiB it
// allocates, kept or not, as evictions (Evict), since each brings the next
// collection closer and a collection's work is paid by everybody. A light
// request's allocation-heavy work is where it pays for collections, so it
// runs between MissBegin and MissEnd; its own allocations round to no MiB.
//
// Parameters: a heap budget of 1,024 MiB. Light requests arrive at 200/s
// and each builds a map of 2,000 entries of 64-byte values (about 200 KiB).
// 64 worker slots. A quarter into the run the aggregation runs for half the
// run in steps of 5 ms, each decoding and aggregating a batch of
// documents (590,000 documents in all, whatever the run's length: 144 MiB
// of leaves kept, about 700 MiB of garbage), reporting progress, checking
// its context and, when ahead of its schedule, waiting for the next batch
// (simulated reads); on the reference machine it is CPU-bound and about on
// schedule. The process's peak RSS stays under 300 MiB; when the run
// closes, the case waits for the aggregation to be over, collects, and
// returns the memory to the OS.
func init() {
	bench.Register(bench.Case{
		Suite: suite, Name: "heap-pressure", Models: "A-c11",
		Resource: "Go heap / GC (Memory)",
		Culprit:  "huge nested aggregation allocating a large share of the heap",
		Victims:  "everything, through GC work",
		// The culprit slows the victims rather than blocking them: an
		// objective of 20 ms (3–6× their normal p99 on the reference
		// machine) is one the slowdown breaks.
		SLO:         20 * time.Millisecond,
		ProcessWide: true,
		Build:       buildHeapPressure,
	})
}

// aggLeaf is one aggregated document: 256 bytes, one pointer.
type aggLeaf struct {
	next  *aggLeaf
	key   uint64
	sum   [29]float64
	count int64
}

type aggBucket struct {
	sub map[uint32]*aggLeaf
}

type docField struct {
	name string
	val  float64
}

var fieldNames = [...]string{"a", "b", "c", "d", "e", "f", "g", "h"}

// decodeDoc reads the next document, of 512 to 1,535 bytes, into a fresh
// buffer and decodes it into a fresh slice of fields; it returns the
// fields and the bytes it allocated. Both are garbage once the document is
// aggregated. It is not inlined so that the slice is allocated on the
// heap, as a decoded document of unknown size is.
//
//go:noinline
func decodeDoc(rng *rand.Rand) ([]docField, int64) {
	raw := make([]byte, 512+rng.IntN(1024))
	for i := 0; i < len(raw); i += 64 {
		raw[i] = byte(rng.Uint32())
	}
	fields := make([]docField, len(fieldNames))
	for f := range fields {
		fields[f] = docField{name: fieldNames[f], val: float64(raw[f*64]) * rng.Float64()}
	}
	return fields, int64(len(raw)) + int64(len(fields))*24
}

func buildHeapPressure(env *bench.Env) (*bench.Service, error) {
	const (
		budgetMiB = 1024
		liveMiB   = 144
		step      = 5 * time.Millisecond
		leafBytes = 256
		mib       = 1 << 20
		terms     = 1024
		subTerms  = 64
		lightKeys = 2000
	)
	heap := env.Ctl.Memory("go-heap", budgetMiB)
	steps := int64(env.Duration / 2 / step)
	docsPerStep := int64(liveMiB) * mib / leafBytes / steps
	var running sync.Mutex // held by the culprit while it runs
	return &bench.Service{
		Rate:    200,
		Workers: 64,
		Light: func(ctx context.Context, i int) error {
			heap.MissBegin(ctx)
			m := make(map[uint64][]byte)
			for k := range uint64(lightKeys) {
				v := make([]byte, 64)
				v[0] = byte(k)
				m[k*2654435761+uint64(i)] = v
			}
			heap.MissEnd(ctx)
			if len(m) != lightKeys {
				panic("heap-pressure: lost keys")
			}
			return ctx.Err()
		},
		Culprit: func(ctx context.Context) error {
			running.Lock()
			defer running.Unlock()
			t := moirai.From(ctx)
			rng := rand.New(rand.NewPCG(env.Seed, 11))
			agg := make(map[uint32]*aggBucket, terms)
			var used, kept, allocated int64 // MiB charged, bytes kept, bytes allocated
			defer func() { heap.Free(ctx, used) }()
			start := time.Now()
			for s := range steps {
				for range docsPerStep {
					fields, n := decodeDoc(rng)
					allocated += n + leafBytes
					term, sub := uint32(rng.Uint64N(terms)), uint32(rng.Uint64N(subTerms))
					b := agg[term]
					if b == nil {
						b = &aggBucket{sub: make(map[uint32]*aggLeaf)}
						agg[term] = b
					}
					leaf := &aggLeaf{next: b.sub[sub], key: uint64(term)<<32 | uint64(sub), count: 1}
					for f := range leaf.sum {
						leaf.sum[f] = fields[f%len(fields)].val
					}
					b.sub[sub] = leaf
				}
				kept += docsPerStep * leafBytes
				if n := kept/mib - used; n > 0 && heap.Use(ctx, n) == nil {
					used += n
				}
				if n := allocated / mib; n > 0 {
					heap.Evict(ctx, n)
					allocated -= n * mib
				}
				t.Progress(s+1, steps)
				if ctx.Err() != nil {
					return context.Cause(ctx)
				}
				if err := paceTo(ctx, start, int64(s), step); err != nil {
					return err
				}
			}
			runtime.KeepAlive(agg)
			return nil
		},
		Close: func() {
			// Waiting for the lock is waiting for the aggregation to be
			// over: its heap is garbage then.
			running.Lock()
			//lint:ignore SA2001 the lock is taken only to wait for the holder
			running.Unlock()
			runtime.GC()
			debug.FreeOSMemory()
		},
	}, nil
}
