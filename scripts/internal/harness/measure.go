package harness

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// StreamSeqs is the last sequence of each stream: the difference between two readings is how
// many messages were stored in between (limits and discards do not change it), which is how
// bench measures hops per event instead of assuming the route's.
func StreamSeqs(ctx context.Context, js jetstream.JetStream, streams ...string) (map[string]uint64, error) {
	out := make(map[string]uint64, len(streams))
	for _, name := range streams {
		ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
		s, err := js.Stream(ictx, name)
		if err == nil {
			var info *jetstream.StreamInfo
			info, err = s.Info(ictx)
			if err == nil {
				out[name] = info.State.LastSeq
			}
		}
		cancel()
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", name, err)
		}
	}
	return out, nil
}

// MetricSum scrapes admin's /metrics and adds up every series of the named metric (all label
// values); false if the metric is absent or the scrape failed.
func MetricSum(admin, name string) (float64, bool) {
	by, found := MetricSumBy(admin, name, "")
	return by[""], found
}

// MetricSumBy scrapes admin's /metrics and adds up the series of the named metric per value of
// label ("" adds them all up under ""); false if the metric is absent or the scrape failed.
func MetricSumBy(admin, name, label string) (map[string]float64, bool) {
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get("http://" + admin + "/metrics")
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	return sumBy(bufio.NewScanner(resp.Body), name, label)
}

// sumBy adds up the text-format series of name read from sc, per value of label.
func sumBy(sc *bufio.Scanner, name, label string) (map[string]float64, bool) {
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	sums := map[string]float64{}
	found := false
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(f) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(f[0], 64); err == nil {
			sums[labelValue(rest, label)] += v
			found = true
		}
	}
	return sums, found
}

// labelValue is label's value in a series' {…} ("" when label is "" or absent).
func labelValue(series, label string) string {
	if label == "" {
		return ""
	}
	_, after, ok := strings.Cut(series, label+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(after, `"`)
	return v
}
