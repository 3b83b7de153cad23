package fixme

import (
	"context"
	"time"
)

func Wait(ctx context.Context) error {
	time.Sleep(time.Millisecond)
	return nil
}
