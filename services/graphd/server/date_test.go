package server_test

import (
	"math/big"
	"strings"
	"testing"
	"time"

	gremlingo "github.com/apache/tinkerpop/gremlin-go/v3/driver"
	"github.com/worldgate/worldgate/services/graphd/graphdtest"
)

// TestDateSteps checks asDate, dateAdd and dateDiff against TinkerPop's
// AsDateStep (DatetimeHelper's formats), DateAddStep and DateDiffStep.
func TestDateSteps(t *testing.T) {
	srv := graphdtest.Start(t, graphdtest.InMemory())
	g := writer(t, srv)
	at := func(s string) time.Time {
		d, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, c := range []struct {
		name string
		tr   GT
		want any
	}{
		{"ISO date-time", g.Inject("2023-08-02T00:00:00Z").AsDate(), at("2023-08-02T00:00:00Z")},
		{"no offset is UTC", g.Inject("2023-08-02T10:20").AsDate(), at("2023-08-02T10:20:00Z")},
		{"offset", g.Inject("2023-08-02T10:20:30.5+02:00").AsDate(), at("2023-08-02T08:20:30.5Z")},
		{"compact offset, lower case", g.Inject("2023-08-02t10:20:30-0130").AsDate(), at("2023-08-02T11:50:30Z")},
		{"date", g.Inject("2023-08-02").AsDate(), at("2023-08-02T00:00:00Z")},
		{"year-month", g.Inject("2023-8").AsDate(), at("2023-08-01T00:00:00Z")},
		{"epoch millis", g.Inject(int64(1694017707000)).AsDate(), at("2023-09-06T16:28:27Z")},
		{"BigInteger millis", g.Inject(big.NewInt(1694017708000)).AsDate(), at("2023-09-06T16:28:28Z")},
		{"add hours", g.Inject(at("2023-08-02T00:00:00Z")).DateAdd(gremlingo.DT.Hour, -1), at("2023-08-01T23:00:00Z")},
		{"add days across a month", g.Inject(at("2023-09-25T12:00:00Z")).DateAdd(gremlingo.DT.Day, 11), at("2023-10-06T12:00:00Z")},
		{"add seconds", g.Inject(at("2023-08-02T00:00:00Z")).DateAdd(gremlingo.DT.Second, 20), at("2023-08-02T00:00:20Z")},
		{"diff", g.Inject(at("2023-08-02T00:00:00Z")).DateDiff(at("2023-08-09T00:00:00Z")), int64(-604800)},
		{"diff truncates", g.Inject(at("2023-08-02T00:00:01.9Z")).DateDiff(at("2023-08-02T00:00:00Z")), int64(1)},
		{"diff by traversal", g.Inject(at("2023-08-08T00:00:00Z")).DateDiff(__.Constant(at("2023-08-01T00:00:00Z"))), int64(604800)},
	} {
		res := toList(t, c.tr)
		if len(res) != 1 {
			t.Errorf("%s: %d results", c.name, len(res))
			continue
		}
		switch w := c.want.(type) {
		case time.Time:
			d, ok := res[0].(time.Time)
			if !ok || !d.Equal(w) {
				t.Errorf("%s: got %s, want %v", c.name, typed(res[0]), w)
			}
		default:
			if typed(res[0]) != typed(w) {
				t.Errorf("%s: got %s, want %s", c.name, typed(res[0]), typed(w))
			}
		}
	}
	for _, c := range []struct {
		tr   GT
		want string
	}{
		{g.Inject("This String is not an ISO 8601 Date").AsDate(), "Can't parse This String is not an ISO 8601 Date as Date."},
		{g.Inject("2023-02-30").AsDate(), "Can't parse 2023-02-30 as Date."},
		{g.Inject(1694017709000.1).AsDate(), "Can't parse java.lang.Double as Date."},
		{g.Inject([]any{1, 2}).AsDate(), "Can't parse java.util.ArrayList as Date."},
		{g.Inject("x").DateAdd(gremlingo.DT.Hour, 1), "dateAdd accept only Date."},
		{g.Inject("x").DateDiff(time.Now()), "DateDiff can only take Date as argument"},
	} {
		_, err := c.tr.ToList()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v should say %q", err, c.want)
		}
	}
}
