package traversal

import (
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"time"

	gb "github.com/worldgate/worldgate/services/graphd/graphbinary"
)

// Date steps (TinkerPop 3.7): asDate(), dateAdd(DT, n), dateDiff(date or
// traversal). Dates are instants (GraphBinary Date, milliseconds); calendar
// arithmetic is done in UTC (TinkerPop uses the server's default time zone,
// UTC on a Gremlin Server in its usual setup).

// runAsDate is AsDateStep: a Date stays, an integral number is milliseconds
// since the epoch, a string is parsed as TinkerPop's DatetimeHelper does.
func runAsDate(_ *execCtx, _ *step, in []*trav) ([]*trav, error) {
	out := make([]*trav, len(in))
	for i, t := range in {
		d, err := asDate(t.obj)
		if err != nil {
			return nil, err
		}
		out[i] = t.split(d)
	}
	return out, nil
}

func asDate(v any) (time.Time, error) {
	switch x := v.(type) {
	case nil:
		return time.Time{}, evalErr("Can't parse null as Date.")
	case time.Time:
		return x, nil
	case int8, int16, int32, int64, int, uint8:
		n, _ := toInt64(x)
		return time.UnixMilli(n).UTC(), nil
	case *big.Int:
		if !x.IsInt64() {
			return time.Time{}, evalErr("Can't parse %s as Date.", x.String())
		}
		return time.UnixMilli(x.Int64()).UTC(), nil
	case string:
		d, ok := parseDatetime(x)
		if !ok {
			return time.Time{}, evalErr("Can't parse %s as Date.", x)
		}
		return d, nil
	}
	return time.Time{}, evalErr("Can't parse %s as Date.", javaClassName(v))
}

// javaClassName is a value's Java class name (as getClass().getName()).
func javaClassName(v any) string {
	switch v.(type) {
	case float64:
		return "java.lang.Double"
	case float32:
		return "java.lang.Float"
	case bool:
		return "java.lang.Boolean"
	case *gb.BigDecimal:
		return "java.math.BigDecimal"
	case []any:
		return "java.util.ArrayList"
	case *gb.Set:
		return "java.util.LinkedHashSet"
	case *gb.Map:
		return "java.util.LinkedHashMap"
	}
	return javaTypeName(v)
}

var (
	// ISO_LOCAL_DATE_TIME with an optional offset (Z, +HH, +HHMM, +HHMMss,
	// +HH:MM, +HH:MM:ss), case-insensitive.
	datetimeRe  = regexp.MustCompile(`^(?i)(\d{4})-(\d{2})-(\d{2})t(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(z|[+-]\d{2}(?:\d{2}(?:\d{2})?)?|[+-]\d{2}:\d{2}(?::\d{2})?)?$`)
	dateRe      = regexp.MustCompile(`^(\d{4})-(\d{2})-(\d{2})$`)
	yearMonthRe = regexp.MustCompile(`^(\d{1,9})-(\d{1,2})$`)
)

// parseDatetime is DatetimeHelper.parse: a date-time (UTC when it has no
// offset), a date (its midnight, UTC) or a year-month (its first day).
func parseDatetime(s string) (time.Time, bool) {
	if m := datetimeRe.FindStringSubmatch(s); m != nil {
		n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
		y, mo, d, h, mi := n(1), n(2), n(3), n(4), n(5)
		sec, nanos := 0, 0
		if m[6] != "" {
			sec = n(6)
		}
		if m[7] != "" {
			frac := m[7] + strings.Repeat("0", 9-len(m[7]))
			nanos, _ = strconv.Atoi(frac)
		}
		if mo < 1 || mo > 12 || d < 1 || d > daysIn(y, mo) || h > 23 || mi > 59 || sec > 59 {
			return time.Time{}, false
		}
		off := 0
		if z := m[8]; z != "" && !strings.EqualFold(z, "z") {
			digits := strings.ReplaceAll(z[1:], ":", "")
			hh, _ := strconv.Atoi(digits[0:2])
			mm, ss := 0, 0
			if len(digits) >= 4 {
				mm, _ = strconv.Atoi(digits[2:4])
			}
			if len(digits) >= 6 {
				ss, _ = strconv.Atoi(digits[4:6])
			}
			if hh > 18 || mm > 59 || ss > 59 {
				return time.Time{}, false
			}
			off = hh*3600 + mm*60 + ss
			if z[0] == '-' {
				off = -off
			}
		}
		t := time.Date(y, time.Month(mo), d, h, mi, sec, nanos, time.UTC).Add(-time.Duration(off) * time.Second)
		return t.Truncate(time.Millisecond), true
	}
	if m := dateRe.FindStringSubmatch(s); m != nil {
		y, _ := strconv.Atoi(m[1])
		mo, _ := strconv.Atoi(m[2])
		d, _ := strconv.Atoi(m[3])
		if mo < 1 || mo > 12 || d < 1 || d > daysIn(y, mo) {
			return time.Time{}, false
		}
		return time.Date(y, time.Month(mo), d, 0, 0, 0, 0, time.UTC), true
	}
	if m := yearMonthRe.FindStringSubmatch(s); m != nil {
		y, _ := strconv.Atoi(m[1])
		mo, _ := strconv.Atoi(m[2])
		// the lenient resolver: month 13 is January of the next year
		return time.Date(y, time.Month(mo), 1, 0, 0, 0, 0, time.UTC), true
	}
	return time.Time{}, false
}

func daysIn(y, m int) int {
	return time.Date(y, time.Month(m)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// runDateAdd is DateAddStep: the date plus n seconds, minutes, hours or
// days (calendar days, in UTC).
func runDateAdd(_ *execCtx, s *step, in []*trav) ([]*trav, error) {
	if len(s.args) != 2 {
		return nil, evalErr("dateAdd() takes a DT (second, minute, hour, day) and a number")
	}
	unit, ok := s.args[0].(gb.Enum)
	if !ok || unit.Type != gb.TypeDT {
		return nil, evalErr("dateAdd() takes a DT (second, minute, hour, day), got %s", describe(s.args[0]))
	}
	n, ok := toInt64(s.args[1])
	if !ok {
		return nil, evalErr("dateAdd() takes an integer amount, got %s", describe(s.args[1]))
	}
	out := make([]*trav, len(in))
	for i, t := range in {
		d, ok := t.obj.(time.Time)
		if !ok {
			return nil, evalErr("dateAdd accept only Date.")
		}
		switch unit.Name {
		case "second":
			d = d.Add(time.Duration(n) * time.Second)
		case "minute":
			d = d.Add(time.Duration(n) * time.Minute)
		case "hour":
			d = d.Add(time.Duration(n) * time.Hour)
		case "day":
			d = d.UTC().AddDate(0, 0, int(n))
		default:
			return nil, evalErr("dateAdd(DT.%s) is not a DT (second, minute, hour, day)", unit.Name)
		}
		out[i] = t.split(d.UTC())
	}
	return out, nil
}

// runDateDiff is DateDiffStep: (date - other) in whole seconds (a Long,
// truncated toward zero); other is a date or the first result of a
// traversal; a null or missing other counts as the epoch.
func runDateDiff(ec *execCtx, s *step, in []*trav) ([]*trav, error) {
	if len(s.args) != 1 {
		return nil, evalErr("dateDiff() takes a date or a traversal")
	}
	out := make([]*trav, len(in))
	for i, t := range in {
		d, ok := t.obj.(time.Time)
		if !ok {
			return nil, evalErr("DateDiff can only take Date as argument, encountered %s", javaClassOrNull(t.obj))
		}
		var other any
		switch a := s.args[0].(type) {
		case *Traversal:
			v, found, err := ec.first(a, t)
			if err != nil {
				return nil, err
			}
			if !found {
				return nil, evalErr("The provided traverser does not map to a value: dateDiff")
			}
			other = v
		default:
			other = a
		}
		var otherMs int64
		switch o := other.(type) {
		case nil:
		case time.Time:
			otherMs = o.UnixMilli()
		default:
			return nil, evalErr("dateDiff() compares with a Date, got %s", javaClassName(other))
		}
		out[i] = t.split((d.UnixMilli() - otherMs) / 1000)
	}
	return out, nil
}

func javaClassOrNull(v any) string {
	if v == nil {
		return "null"
	}
	return "class " + javaClassName(v)
}
