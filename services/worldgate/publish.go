package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/worldgate/worldgate/events"
	"github.com/worldgate/worldgate/shared/config"
	"github.com/worldgate/worldgate/shared/logx"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/tracing"
)

type publishFlags struct {
	nats                              natsFlags
	file, jsonEnv                     string
	eventType, payload, actor, source string
	correlationID, idempotencyKey     string
	fill, validateOnly, quiet         bool
	maxBytes                          int
}

func runPublish(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f publishFlags
	fs := flag.NewFlagSet("publish", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f.nats.register(fs)
	fs.StringVar(&f.file, "f", "", "JSON-lines file of envelopes, one per line; - reads standard input")
	fs.StringVar(&f.jsonEnv, "json", "", "one envelope as JSON")
	fs.StringVar(&f.eventType, "type", "", "event type for an envelope built from flags, e.g. Player.Moved")
	fs.StringVar(&f.payload, "payload", "", "payload JSON for an envelope built from flags")
	fs.StringVar(&f.actor, "actor", "system:cli", "actor as kind:id for an envelope built from flags, e.g. player:player:ada")
	fs.StringVar(&f.source, "source", "worldgate-cli", "source of an envelope built from flags or filled in")
	fs.StringVar(&f.correlationID, "correlation-id", "", "correlation id (default: the event id)")
	fs.StringVar(&f.idempotencyKey, "idempotency-key", "", "idempotency key (default: the event id); reuse it when retrying")
	fs.BoolVar(&f.fill, "fill", false, "fill missing specVersion, eventId, occurredUtc, source, correlationId and idempotencyKey")
	fs.BoolVar(&f.validateOnly, "validate-only", false, "only validate; needs no server. Exit 1 if any envelope is invalid")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress bar")
	fs.IntVar(&f.maxBytes, "max-bytes", events.DefaultMaxBytes, "size limit of one envelope")
	tc := tracing.Config{ServiceName: "worldgate-publish"}
	tc.RegisterFlags(fs)
	if err := config.Parse(fs, args, config.Prefix); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return exitError{2}
	}
	lines, name, closeInput, err := f.input()
	if err != nil {
		return err
	}
	defer closeInput()

	stopTracing, err := tracing.Setup(ctx, tc) // each envelope starts a trace when on
	if err != nil {
		return err
	}
	defer func() {
		if err := stopTracing(); err != nil {
			fmt.Fprintf(stderr, "tracing: the last spans were not exported: %v\n", err)
		}
	}()
	var js jetstream.JetStream
	if !f.validateOnly {
		nc, j, err := natsx.Connect(f.nats.as("worldgate-publish"), logx.Discard())
		if err != nil {
			return err
		}
		defer nc.Close()
		js = j
	}
	p := &publisher{js: js, dec: events.Decoder{MaxBytes: f.maxBytes}, fill: f.fill, source: f.source, out: stderr}
	if tty, ok := stderr.(*os.File); ok && name != "" && !f.quiet && isTerminal(tty) {
		p.progress = newProgress(tty, name)
	}
	return p.run(ctx, lines)
}

// input yields the envelopes to publish, one JSON document per element, with a name for the
// progress bar when they come from a file.
func (f *publishFlags) input() (next func() (string, bool, error), name string, closeFn func(), err error) {
	closeFn = func() {}
	sources := 0
	for _, s := range []string{f.file, f.jsonEnv, f.eventType} {
		if s != "" {
			sources++
		}
	}
	if sources != 1 {
		return nil, "", closeFn, errors.New("give exactly one of -f FILE, -json ENVELOPE, or -type TYPE -payload JSON")
	}
	switch {
	case f.jsonEnv != "":
		return single(f.jsonEnv), "", closeFn, nil
	case f.eventType != "":
		env, err := f.fromFlags()
		if err != nil {
			return nil, "", closeFn, err
		}
		return single(env), "", closeFn, nil
	}
	var r io.Reader = os.Stdin
	name = "stdin"
	if f.file != "-" {
		file, err := os.Open(f.file)
		if err != nil {
			return nil, "", closeFn, err
		}
		r, name, closeFn = file, f.file, func() { file.Close() }
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	return func() (string, bool, error) {
		if !sc.Scan() {
			return "", false, sc.Err()
		}
		return sc.Text(), true, nil
	}, name, closeFn, nil
}

func single(s string) func() (string, bool, error) {
	done := false
	return func() (string, bool, error) {
		if done {
			return "", false, nil
		}
		done = true
		return s, true, nil
	}
}

func (f *publishFlags) fromFlags() (string, error) {
	kind, id, ok := strings.Cut(f.actor, ":")
	if !ok {
		return "", fmt.Errorf("-actor %q: write it as kind:id, e.g. player:player:ada", f.actor)
	}
	var payload json.RawMessage
	if err := json.Unmarshal([]byte(f.payload), &payload); err != nil {
		return "", fmt.Errorf("-payload is not JSON: %w", err)
	}
	env, err := events.NewEnvelope(f.eventType, f.source, events.Actor{Kind: kind, ID: id}, payload)
	if err != nil {
		return "", err
	}
	if f.correlationID != "" {
		env.CorrelationID = f.correlationID
	}
	if f.idempotencyKey != "" {
		env.IdempotencyKey = f.idempotencyKey
	}
	b, err := json.Marshal(env)
	return string(b), err
}

type publisher struct {
	js       jetstream.JetStream
	dec      events.Decoder
	fill     bool
	source   string
	out      io.Writer
	progress *progress

	valid, published, duplicates, invalid int
}

type pending struct {
	line int
	ack  jetstream.PubAckFuture
}

func (p *publisher) run(ctx context.Context, next func() (string, bool, error)) error {
	var inflight []pending
	flush := func() error {
		for _, pf := range inflight {
			select {
			case ack := <-pf.ack.Ok():
				p.published++
				if ack.Duplicate {
					p.duplicates++
				}
			case err := <-pf.ack.Err():
				return fmt.Errorf("line %d: publish failed, stopping (lines after it were not sent): %w", pf.line, err)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		inflight = inflight[:0]
		return nil
	}
	line := 0
	for {
		text, ok, err := next()
		if err != nil {
			return fmt.Errorf("read input after line %d: %w", line, err)
		}
		if !ok {
			break
		}
		line++
		if strings.TrimSpace(text) == "" {
			continue
		}
		env, data, err := p.prepare(text)
		if err != nil {
			p.invalid++
			p.progress.clear()
			fmt.Fprintf(p.out, "line %d: %v\n", line, err)
			continue
		}
		p.valid++
		if p.js != nil {
			msg := &nats.Msg{Subject: events.Subject(env.Type), Data: data, Header: nats.Header{}}
			msg.Header.Set(events.HeaderCorrelationID, env.CorrelationID)
			msg.Header.Set(events.HeaderType, env.Type)
			_, span := tracing.StartPublish(ctx, msg.Subject, env.CorrelationID, tracing.HeaderCarrier(msg.Header)) // first hop; nothing when tracing is off
			f, err := p.js.PublishMsgAsync(msg, jetstream.WithMsgID(env.IdempotencyKey))
			tracing.EndSpan(span, err)
			if err != nil {
				return fmt.Errorf("line %d: publish: %w", line, err)
			}
			inflight = append(inflight, pending{line, f})
			if len(inflight) >= 256 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		p.progress.update(line)
	}
	if err := flush(); err != nil {
		return err
	}
	p.progress.done(line)
	if p.js == nil {
		fmt.Fprintf(p.out, "%d valid, %d invalid\n", p.valid, p.invalid)
	} else {
		fmt.Fprintf(p.out, "published %d (%d already there: same idempotency key), %d invalid\n", p.published, p.duplicates, p.invalid)
	}
	if p.invalid > 0 {
		return exitError{1}
	}
	return nil
}

// prepare fills (if asked) and strictly validates one envelope.
func (p *publisher) prepare(text string) (*events.Envelope, []byte, error) {
	data := []byte(text)
	if p.fill {
		var m map[string]any
		if err := json.Unmarshal(data, &m); err == nil {
			id, _ := uuid.NewV7()
			defaults := map[string]any{
				"specVersion": events.SpecVersion, "eventId": id.String(), "occurredUtc": time.Now().UTC().Format(time.RFC3339Nano),
				"source": p.source,
			}
			for k, v := range defaults {
				if _, ok := m[k]; !ok {
					m[k] = v
				}
			}
			for _, k := range []string{"correlationId", "idempotencyKey"} {
				if _, ok := m[k]; !ok {
					m[k] = m["eventId"]
				}
			}
			data, _ = json.Marshal(m)
		}
	}
	env, err := p.dec.Envelope(data)
	if err != nil {
		return nil, nil, err
	}
	return env, data, nil
}
