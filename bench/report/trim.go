package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/moirai-go/moirai/bench"
)

// Trim removes from r what no report reads, so that a saved results file
// holds what docs/RESULTS.md and its figures need and no more: every row
// and the count of runs stay; of the runs (their time series and events,
// the bulk of a results.json) only those a figure draws stay, the
// pathfence suite's per-path runs, with the one kind of event the figure
// marks (the downstream's stalls). Trimming a trimmed r changes nothing.
// The raw runs are regenerated on demand by `moirai bench run --out DIR`,
// whose report.html draws them.
func Trim(r *bench.Results) {
	r.RunsMeasured = r.NumRuns()
	var kept []bench.Run // new arrays: r's old ones may be shared
	for _, run := range r.Runs {
		if suiteOfCase(r, run.Case) != pathfenceSuite || !pathfenceDrawn(&run) {
			continue
		}
		var stalls []bench.Event
		for _, e := range run.Events {
			if e.Kind == stallEvent {
				stalls = append(stalls, e)
			}
		}
		run.Events = stalls
		kept = append(kept, run)
	}
	r.Runs = kept
}

// suiteOfCase returns the suite of a case's rows (the suite a run of the
// case is reported under), or r's suite.
func suiteOfCase(r *bench.Results, name string) string {
	for _, row := range r.Rows {
		if row.Case == name && row.Suite != "" {
			return row.Suite
		}
	}
	return r.Suite
}

// WriteCompact writes r as JSON with one row and one run per line, and
// without the members whose value is a plain number 0 (a reader's zero
// value; a pointer's 0 stays, since its absence means something else): a
// third of the indented form's size, and still a one-line diff per row when
// a run is saved again. Load reads it back to the same r.
func WriteCompact(w io.Writer, r *bench.Results) error {
	head := *r
	head.Rows, head.Runs = nil, nil
	b, err := json.Marshal(head)
	if err != nil {
		return err
	}
	// Rows and Runs are the last two fields, without omitempty.
	const tail = `"rows":null,"runs":null}`
	if !bytes.HasSuffix(b, []byte(tail)) {
		return fmt.Errorf("report.WriteCompact: unexpected field order in %s", b)
	}
	var out bytes.Buffer
	out.Write(b[:len(b)-len(tail)])
	if err := writeLines(&out, "rows", r.Rows); err != nil {
		return err
	}
	out.WriteString(",")
	if err := writeLines(&out, "runs", r.Runs); err != nil {
		return err
	}
	out.WriteString("}\n")
	_, err = w.Write(out.Bytes())
	return err
}

// writeLines writes "name":[…] with one element of s per line.
func writeLines[T any](out *bytes.Buffer, name string, s []T) error {
	fmt.Fprintf(out, "\n%q:[", name)
	for i := range s {
		b, err := compactJSON(reflect.ValueOf(&s[i]).Elem())
		if err != nil {
			return err
		}
		if i > 0 {
			out.WriteString(",")
		}
		out.WriteString("\n")
		out.Write(b)
	}
	if len(s) > 0 {
		out.WriteString("\n")
	}
	out.WriteString("]")
	return nil
}

var marshalerType = reflect.TypeFor[json.Marshaler]()

// compactJSON encodes v as encoding/json does, leaving out the members of
// structs (at any depth) whose value is a non-pointer number equal to 0.
// Types with their own encoding (time.Time) are encoded by it.
func compactJSON(v reflect.Value) ([]byte, error) {
	t := v.Type()
	switch {
	case t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType):
		return json.Marshal(v.Interface())
	case t.Kind() == reflect.Slice && !v.IsNil() && t.Elem().Kind() == reflect.Struct:
		var b bytes.Buffer
		b.WriteByte('[')
		for i := range v.Len() {
			if i > 0 {
				b.WriteByte(',')
			}
			e, err := compactJSON(v.Index(i))
			if err != nil {
				return nil, err
			}
			b.Write(e)
		}
		b.WriteByte(']')
		return b.Bytes(), nil
	case t.Kind() != reflect.Struct:
		return json.Marshal(v.Interface())
	}
	var b bytes.Buffer
	b.WriteByte('{')
	n := 0
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || f.Anonymous {
			return nil, fmt.Errorf("report: cannot encode field %s of %s compactly", f.Name, t)
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		fv := v.Field(i)
		switch {
		case isNumber(fv.Kind()) && fv.IsZero():
			continue
		case strings.Contains(opts, "omitempty") && omitEmpty(fv):
			continue
		}
		e, err := compactJSON(fv)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(name)
		b.Write(k)
		b.WriteByte(':')
		b.Write(e)
		n++
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func isNumber(k reflect.Kind) bool {
	return reflect.Int <= k && k <= reflect.Float64
}

// omitEmpty reports whether encoding/json's omitempty leaves fv out.
func omitEmpty(fv reflect.Value) bool {
	switch fv.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return fv.Len() == 0
	case reflect.Bool:
		return !fv.Bool()
	case reflect.Pointer, reflect.Interface:
		return fv.IsNil()
	}
	return isNumber(fv.Kind()) && fv.IsZero()
}
