package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// A guard's config file is YAML whose keys are the flags' names and whose
// values are what the flags take (durations as "250ms", lists as YAML
// sequences):
//
//	dsn: postgres://moirai_guard@db:5432/app
//	slo: 1s
//	act: true
//	protect-user: [replicator, backup]
//	audit: /var/lib/moirai-guard/audit.jsonl
//
// Flags given on the command line override the file. SIGHUP reads it
// again (see runGuard).

// startOnly are the settings a reload cannot change: they name the
// process's connections, files and listeners.
var startOnly = []string{"dsn", "metrics-addr", "audit", "record", "lease", "once"}

// maxConfig bounds a config file.
const maxConfig = 1 << 20

// loadGuardFlags returns the flags of `moirai guard` from the config file
// at path ("" for none), overridden by the flags set on cmdline.
func loadGuardFlags(cmdline *pflag.FlagSet, path string) (*guardFlags, error) {
	f := &guardFlags{}
	fs := pflag.NewFlagSet("guard", pflag.ContinueOnError)
	f.registerOn(fs, true)
	if path != "" {
		if err := applyConfig(fs, path); err != nil {
			return nil, err
		}
	}
	var err error
	cmdline.Visit(func(fl *pflag.Flag) {
		dst := fs.Lookup(fl.Name)
		if err != nil || dst == nil {
			return
		}
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			err = dst.Value.(pflag.SliceValue).Replace(sv.GetSlice())
			return
		}
		err = fs.Set(fl.Name, fl.Value.String())
	})
	return f, err
}

// applyConfig sets fs's flags from the YAML file at path.
func applyConfig(fs *pflag.FlagSet, path string) error {
	file, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	defer file.Close()
	data, err := io.ReadAll(io.LimitReader(file, maxConfig+1))
	if err != nil {
		return fmt.Errorf("--config %s: %w", path, err)
	}
	if len(data) > maxConfig {
		return fmt.Errorf("--config %s: larger than %d bytes", path, maxConfig)
	}
	var m map[string]any
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&m); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("--config %s: %w", path, err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := setFromConfig(fs, k, m[k]); err != nil {
			return fmt.Errorf("--config %s: %w", path, err)
		}
	}
	return nil
}

func setFromConfig(fs *pflag.FlagSet, key string, v any) error {
	fl := fs.Lookup(key)
	if fl == nil || key == "config" {
		var names []string
		fs.VisitAll(func(fl *pflag.Flag) { names = append(names, fl.Name) })
		return fmt.Errorf("unknown key %q: the keys are the flags' names (%s)", key, strings.Join(names, ", "))
	}
	switch v := v.(type) {
	case nil:
		return fmt.Errorf("%s: no value", key)
	case map[string]any:
		return fmt.Errorf("%s: a mapping, want a value", key)
	case []any:
		sv, ok := fl.Value.(pflag.SliceValue)
		if !ok {
			return fmt.Errorf("%s: a list, want one value", key)
		}
		strs := make([]string, len(v))
		for i, x := range v {
			if _, ok := x.(map[string]any); ok || x == nil {
				return fmt.Errorf("%s[%d]: want a string", key, i)
			}
			strs[i] = fmt.Sprint(x)
		}
		return sv.Replace(strs)
	default:
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			return sv.Replace([]string{fmt.Sprint(v)})
		}
		if err := fs.Set(key, fmt.Sprint(v)); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		return nil
	}
}

// changedStartOnly names the start-only settings that differ between a
// and b.
func changedStartOnly(a, b *pflag.FlagSet) []string {
	var out []string
	for _, name := range startOnly {
		fa, fb := a.Lookup(name), b.Lookup(name)
		if fa != nil && fb != nil && fa.Value.String() != fb.Value.String() {
			out = append(out, name)
		}
	}
	return out
}
