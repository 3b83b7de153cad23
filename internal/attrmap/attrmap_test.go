package attrmap

import (
	"log/slog"
	"reflect"
	"testing"
	"time"
)

func TestMapNestsGroupsAndAsksLeafForValues(t *testing.T) {
	as := []slog.Attr{
		slog.Duration("elapsed", 1500*time.Millisecond),
		slog.Group("gain", slog.Float64("share", 0.5), slog.Group("of", slog.String("res", "pool"))),
		slog.Any("lazy", lazy{}),
	}
	got := Map(as, func(v slog.Value) any {
		if v.Kind() == slog.KindDuration {
			return v.Duration().String()
		}
		return v.Any()
	})
	want := map[string]any{
		"elapsed": "1.5s",
		"gain":    map[string]any{"share": 0.5, "of": map[string]any{"res": "pool"}},
		"lazy":    int64(3), // resolved before leaf sees it
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Map = %#v, want %#v", got, want)
	}
	if Map(nil, nil) != nil {
		t.Fatal("Map of no attributes is not nil")
	}
}

// lazy is a value resolved when written.
type lazy struct{}

func (lazy) LogValue() slog.Value { return slog.IntValue(3) }
