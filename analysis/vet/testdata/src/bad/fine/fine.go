// Package fine is analysed beside the broken one.
package fine

import (
	"sync"
	"time"
)

var mu sync.Mutex

func Locked() {
	mu.Lock()
	time.Sleep(time.Millisecond)
	mu.Unlock()
}
