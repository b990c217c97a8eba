package config

import (
	"bytes"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
)

// KeyInfo describes one key of the config file, as Keys lists them.
type KeyInfo struct {
	// Key is the dotted TOML key ("round", "slurm.bin_dir", "gres.aliases").
	Key string
	// Field is the Go field path ("Round", "Slurm.BinDir").
	Field string
	// Kind is "string", "duration", "bool" or "map" (a table).
	Kind string
	// Elem is the kind of a map's values ("string", "float64").
	Elem string `json:",omitempty"`
}

// Keys lists every key of Config in file order, found through the
// toml tags: the reference the example config, `hadar config check` and
// the hadar.toml(5) man page are checked against.
func Keys() []KeyInfo {
	var out []KeyInfo
	walkConfig(reflect.TypeOf(Config{}), "", "", &out)
	return out
}

var durationType = reflect.TypeOf(Duration{})

func walkConfig(t reflect.Type, prefix, fieldPrefix string, out *[]KeyInfo) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := strings.Split(f.Tag.Get("toml"), ",")[0]
		if name == "" || name == "-" {
			continue
		}
		key := prefix + name
		field := fieldPrefix + f.Name
		switch {
		case f.Type == durationType:
			*out = append(*out, KeyInfo{Key: key, Field: field, Kind: "duration"})
		case f.Type.Kind() == reflect.Struct:
			walkConfig(f.Type, key+".", field+".", out)
		case f.Type.Kind() == reflect.Map:
			*out = append(*out, KeyInfo{Key: key, Field: field, Kind: "map", Elem: f.Type.Elem().Kind().String()})
		case f.Type.Kind() == reflect.Bool:
			*out = append(*out, KeyInfo{Key: key, Field: field, Kind: "bool"})
		default:
			*out = append(*out, KeyInfo{Key: key, Field: field, Kind: f.Type.Kind().String()})
		}
	}
}

// Format writes cfg as a TOML file that Parse reads back to the
// same value: every key, defaults included, tables in the order of the
// Config struct, map entries sorted, durations in their shortest unit
// ("6m", "90s", "1h30m").
func Format(cfg Config) []byte {
	var b bytes.Buffer
	formatTable(&b, reflect.ValueOf(cfg), "")
	return bytes.TrimLeft(b.Bytes(), "\n")
}

func formatTable(b *bytes.Buffer, v reflect.Value, prefix string) {
	t := v.Type()
	type sub struct {
		key string
		v   reflect.Value
	}
	var subs []sub
	header := prefix != ""
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := strings.Split(f.Tag.Get("toml"), ",")[0]
		if name == "" || name == "-" {
			continue
		}
		fv := v.Field(i)
		if f.Type != durationType && (f.Type.Kind() == reflect.Struct || f.Type.Kind() == reflect.Map) {
			subs = append(subs, sub{prefix + tomlKey(name), fv})
			continue
		}
		if header {
			fmt.Fprintf(b, "\n[%s]\n", strings.TrimSuffix(prefix, "."))
			header = false
		}
		fmt.Fprintf(b, "%s = %s\n", tomlKey(name), tomlValue(fv))
	}
	for _, s := range subs {
		if s.v.Kind() == reflect.Map {
			fmt.Fprintf(b, "\n[%s]\n", s.key)
			keys := make([]string, 0, s.v.Len())
			for _, k := range s.v.MapKeys() {
				keys = append(keys, k.String())
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(b, "%s = %s\n", tomlKey(k), tomlValue(s.v.MapIndex(reflect.ValueOf(k))))
			}
			continue
		}
		formatTable(b, s.v, s.key+".")
	}
}

func tomlValue(v reflect.Value) string {
	if d, ok := v.Interface().(Duration); ok {
		return tomlString(FormatDuration(d.Duration))
	}
	switch v.Kind() {
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.String:
		return tomlString(v.String())
	case reflect.Int, reflect.Int64, reflect.Int32:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Float64, reflect.Float32:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case reflect.Slice:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = tomlValue(v.Index(i))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return tomlString(fmt.Sprint(v.Interface()))
}

// FormatDuration writes d in its shortest exact form with the largest
// units: 360s -> "6m", 5400s -> "1h30m", 1500ms -> "1.5s".
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	neg := d < 0
	if neg {
		d = -d
	}
	var s string
	switch {
	case d%time.Second != 0:
		s = d.String()
	default:
		h, m, sec := d/time.Hour, (d%time.Hour)/time.Minute, (d%time.Minute)/time.Second
		if h > 0 {
			s += strconv.FormatInt(int64(h), 10) + "h"
		}
		if m > 0 {
			s += strconv.FormatInt(int64(m), 10) + "m"
		}
		if sec > 0 {
			s += strconv.FormatInt(int64(sec), 10) + "s"
		}
	}
	if neg {
		s = "-" + s
	}
	return s
}

// tomlKey quotes a key unless it is a bare key.
func tomlKey(k string) string {
	if k == "" {
		return `""`
	}
	for _, r := range k {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return tomlString(k)
		}
	}
	return k
}

// tomlString is a TOML basic string (only the escapes TOML knows).
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
