package natsx_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// Scan reads a range of a stream by sequence, stops when told to, and never waits for messages
// a stream does not have.
func TestScanReadsARangeAndNeverWaits(t *testing.T) {
	e := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := e.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "SCAN", Subjects: []string{"scan.>"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 10; i++ {
		if _, err := e.JS.Publish(ctx, "scan.m", []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	from := func(seq uint64) jetstream.OrderedConsumerConfig {
		return jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: seq}
	}
	read := func(cfg jetstream.OrderedConsumerConfig, last uint64, stopAt string) (string, int) {
		t.Helper()
		var got string
		n, err := natsx.Scan(ctx, s, cfg, last, func(m jetstream.Msg, meta *jetstream.MsgMetadata) bool {
			if meta.Timestamp.IsZero() || (!cfg.HeadersOnly && strconv.FormatUint(meta.Sequence.Stream, 10) != string(m.Data())) {
				t.Errorf("message %q at sequence %d, stored %v", m.Data(), meta.Sequence.Stream, meta.Timestamp)
			}
			got += string(m.Data()) + " "
			return stopAt != "" && string(m.Data()) == stopAt
		})
		if err != nil {
			t.Fatal(err)
		}
		return got, n
	}
	if got, n := read(from(3), 7, ""); got != "3 4 5 6 7 " || n != 5 {
		t.Errorf("3 to 7: %q (%d)", got, n)
	}
	if got, n := read(from(1), 10, "4"); got != "1 2 3 4 " || n != 4 {
		t.Errorf("stopped at 4: %q (%d)", got, n)
	}
	start := time.Now()
	if got, _ := read(from(8), 50, ""); got != "8 9 10 " {
		t.Errorf("8 to 50 of 10: %q", got)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("a range past the stream's end took %s: Scan waited for messages", waited)
	}
	headers := jetstream.OrderedConsumerConfig{HeadersOnly: true}
	if got, _ := read(headers, 2, ""); got != "  " {
		t.Errorf("headers only: %q, want no bodies", got)
	}
}
