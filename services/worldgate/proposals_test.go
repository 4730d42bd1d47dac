package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/worldgate/worldgate/services/gate/approval"
	"github.com/worldgate/worldgate/shared/natsx"
	"github.com/worldgate/worldgate/shared/natsx/natstest"
)

// One malformed record in the approvals bucket made `worldgate proposals list` fail with
// nothing listed (issue 38). It is now a line naming its sequence and why it could not be
// read, and the other held proposals are listed.
func TestProposalsListShowsAnUnreadableRecordAndTheRest(t *testing.T) {
	e := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv := e.KeyValue(t, natsx.BucketApprovals)
	good, err := json.Marshal(approval.Record{ProposalID: "p-good", Kind: "npc_removed", CorrelationID: "corr-good",
		Status: approval.StatusPending, HeldUTC: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, approval.Key("p-good"), good); err != nil {
		t.Fatal(err)
	}
	seq, err := kv.Put(ctx, approval.Key("p-bad"), []byte(`{"proposalId": "p-bad", "status": `))
	if err != nil {
		t.Fatal(err)
	}

	var out, stderr bytes.Buffer
	if err := runProposals(context.Background(), []string{"list", "-nats-url", e.Server.ClientURL()}, &out, &stderr); err != nil {
		t.Fatalf("list failed on one malformed record: %v", err)
	}
	text := out.String()
	if !strings.Contains(text, "p-good") {
		t.Errorf("the readable record is not listed:\n%s", text)
	}
	if !strings.Contains(text, fmt.Sprintf("(sequence %d) could not be read", seq)) || !strings.Contains(text, "not a held proposal's record") {
		t.Errorf("no line names the unreadable record's sequence %d and why:\n%s", seq, text)
	}

	out.Reset()
	stderr.Reset()
	if err := runProposals(context.Background(), []string{"list", "-json", "-nats-url", e.Server.ClientURL()}, &out, &stderr); err != nil {
		t.Fatalf("list -json failed on one malformed record: %v", err)
	}
	var recs []approval.Record
	if err := json.Unmarshal(out.Bytes(), &recs); err != nil || len(recs) != 1 || recs[0].ProposalID != "p-good" {
		t.Errorf("list -json printed %q (%v), want the readable record alone", out.String(), err)
	}
	if !strings.Contains(stderr.String(), fmt.Sprintf("(sequence %d) could not be read", seq)) {
		t.Errorf("list -json did not name the unreadable record on stderr: %q", stderr.String())
	}
}
