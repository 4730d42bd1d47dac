package natsx

import (
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"maps"
)

// RegisterFlags adds the topology's flags to fs: -replicas, -duplicate-window and -retention.
// Every process that provisions must be given the same values (or leave provisioning to
// `worldgate provision`), else each start puts its own back.
func (o *TopologyOptions) RegisterFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.Replicas, "replicas", 1, "JetStream stream and bucket replicas when provisioning (3 in production)")
	fs.DurationVar(&o.DuplicateWindow, "duplicate-window", 10*time.Minute, "every stream's Nats-Msg-Id duplicate window (shortened to a stream's max age if that is shorter)")
	fs.IntVar(&o.Partitions, "partitions", DefaultPartitions, fmt.Sprintf("partitions of validated proposals in PROPOSALS (event-processor replicas share them; fixed once provisioned; at most %d)", MaxPartitions))
	fs.Var(retentionFlag{o}, "retention", "age and size limits per stream or bucket, over the defaults: NAME=AGE/SIZE,… (e.g. WORLD=12h/4GiB,COMMITTED=90d/64GiB; AGE in Go units or d, SIZE in B, KiB, MiB, GiB, TiB; either may be left empty). Defaults: "+DefaultRetention())
}

// DefaultRetention is DefaultLimits in -retention's syntax.
func DefaultRetention() string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(DefaultLimits)) {
		l := DefaultLimits[name]
		parts = append(parts, name+"="+formatAge(l.MaxAge)+"/"+formatSize(l.MaxBytes))
	}
	return strings.Join(parts, ",")
}

type retentionFlag struct{ o *TopologyOptions }

func (f retentionFlag) String() string {
	if f.o == nil || len(f.o.Limits) == 0 {
		return ""
	}
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(f.o.Limits)) {
		l := f.o.Limits[name]
		parts = append(parts, name+"="+formatAge(l.MaxAge)+"/"+formatSize(l.MaxBytes))
	}
	return strings.Join(parts, ",")
}

func (f retentionFlag) Set(v string) error {
	limits, err := ParseRetention(v)
	if err != nil {
		return err
	}
	f.o.Limits = limits
	return nil
}

// ParseRetention parses -retention's NAME=AGE/SIZE list. Every name must be a stream or bucket
// of the topology.
func ParseRetention(v string) (map[string]Limits, error) {
	out := map[string]Limits{}
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, spec, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want NAME=AGE/SIZE", item)
		}
		if _, known := DefaultLimits[name]; !known {
			return nil, fmt.Errorf("%q: no stream or bucket %s (known: %s)", item, name, strings.Join(slices.Sorted(maps.Keys(DefaultLimits)), ", "))
		}
		age, size, _ := strings.Cut(spec, "/")
		var l Limits
		var err error
		if age != "" {
			if l.MaxAge, err = parseAge(age); err != nil {
				return nil, fmt.Errorf("%q: age: %w", item, err)
			}
		}
		if size != "" {
			if l.MaxBytes, err = parseSize(size); err != nil {
				return nil, fmt.Errorf("%q: size: %w", item, err)
			}
		}
		out[name] = l
	}
	return out, nil
}

func parseAge(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("%q is not a positive number of days", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is not a positive duration", s)
	}
	return d, nil
}

var sizeUnits = []struct {
	suffix string
	n      int64
}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

func parseSize(s string) (int64, error) {
	for _, u := range sizeUnits {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			n, err := strconv.ParseInt(num, 10, 64)
			if err != nil || n <= 0 {
				return 0, fmt.Errorf("%q is not a positive size", s)
			}
			return n * u.n, nil
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a positive size (e.g. 512MiB, 4GiB)", s)
	}
	return n, nil
}

func formatAge(d time.Duration) string {
	if d == 0 {
		return ""
	}
	if d%(24*time.Hour) == 0 {
		return strconv.Itoa(int(d/(24*time.Hour))) + "d"
	}
	return d.String()
}

func formatSize(n int64) string {
	if n == 0 {
		return ""
	}
	for _, u := range sizeUnits {
		if n%u.n == 0 {
			return strconv.FormatInt(n/u.n, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}
