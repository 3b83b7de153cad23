// Package broken does not type-check: moirai vet reports it and goes on.
package broken

import (
	"sync"
	"time"
)

var mu sync.Mutex

func Broken() {
	mu.Lock()
	time.Sleep(undefined)
	mu.Unlock()
}
