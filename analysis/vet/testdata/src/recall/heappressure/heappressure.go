// Package heappressure is bench/inproc's heap-pressure service written
// with the standard library only: the resource is the Go heap itself.
package heappressure

import (
	"context"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"sync"
	"time"
)

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

func build(d time.Duration, seed uint64) *Service {
	const (
		liveMiB   = 144
		step      = 5 * time.Millisecond
		leafBytes = 256
		mib       = 1 << 20
		terms     = 1024
		subTerms  = 64
		lightKeys = 2000
	)
	// resource: go-heap (the garbage-collected heap)
	steps := int64(d / 2 / step)
	docsPerStep := int64(liveMiB) * mib / leafBytes / steps
	var running sync.Mutex // held by the culprit while it runs
	return &Service{
		Light: func(ctx context.Context, i int) error {
			m := make(map[uint64][]byte)
			for k := range uint64(lightKeys) {
				v := make([]byte, 64)
				v[0] = byte(k)
				m[k*2654435761+uint64(i)] = v
			}
			if len(m) != lightKeys {
				panic("heap-pressure: lost keys")
			}
			return ctx.Err()
		},
		Culprit: func(ctx context.Context) error {
			running.Lock()
			defer running.Unlock()
			rng := rand.New(rand.NewPCG(seed, 11))
			agg := make(map[uint32]*aggBucket, terms)
			start := time.Now()
			for s := range steps {
				for range docsPerStep {
					fields, _ := decodeDoc(rng)
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
				if ctx.Err() != nil {
					return context.Cause(ctx)
				}
				if err := paceTo(ctx, start, s, step); err != nil {
					return err
				}
			}
			runtime.KeepAlive(agg)
			return nil
		},
		Close: func() {
			running.Lock()
			running.Unlock()
			runtime.GC()
			debug.FreeOSMemory()
		},
	}
}

var _ = build
