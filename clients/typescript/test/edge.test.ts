// The client against a running edge: EDGE_URL and EDGE_KEY name it (TestTypeScriptClientAgainstDev
// in services/worldgate starts worldgate dev with the demo world and runs `npm test` with them).
import { test } from "node:test";
import assert from "node:assert/strict";

import { Edge, EdgeError, newEnvelope, outcomeText as text, uuid7 } from "../src/index.js";

const url = process.env["EDGE_URL"];
const key = process.env["EDGE_KEY"];
if (!url || !key) throw new Error("EDGE_URL and EDGE_KEY name the edge these tests run against (worldgate dev's edge.url and edge.key)");
const edge = new Edge({ url, key });

test("uuid7 makes version-7 ids in time order", () => {
  const a = uuid7(1_700_000_000_000), b = uuid7(1_700_000_000_001);
  assert.match(a, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.ok(a < b);
});

test("an NPC answers: publish, then the long poll until decided", async () => {
  const env = newEnvelope("Player.SpokeToNPC", { kind: "player", id: "player:cass" },
    { playerId: "player:cass", npcId: "npc:oren", locationId: "loc:tavern", utterance: "Any news from the mine?" }, { source: "ts-client/test" });
  const published = await edge.publish(env);
  assert.equal(published.eventId, env.eventId);
  assert.equal(published.accepted[0]?.duplicate, false);
  const again = await edge.publish(env); // the same envelope: stored once
  assert.equal(again.accepted[0]?.duplicate, true);
  const outs = await edge.awaitOutcome(env.eventId, AbortSignal.timeout(60_000));
  assert.equal(outs.length, 1);
  const o = outs[0]!;
  assert.equal(o.eventId, env.eventId);
  assert.ok(["committed", "fallback", "reused"].includes(o.kind), `${o.kind}: ${text(o)}`);
  assert.notEqual(text(o), "");
  // Every attempt behind it, and what the whole request cost.
  const j = await edge.journey(env.eventId);
  assert.ok(j.attempts.some((a) => a.proposalId === o.proposalId && a.result === o.kind), JSON.stringify(j));
  assert.ok(j.tokens.prompt >= (o.journey?.tokens.prompt ?? 0));
});

test("a move into a place whose ambience is fresh is skipped, with when to ask again", async () => {
  const move = () => newEnvelope("Player.Moved", { kind: "player", id: "player:bram" },
    { playerId: "player:bram", fromLocationId: "loc:market", toLocationId: "loc:forge-row", direction: "east" });
  const first = await edge.send(move(), AbortSignal.timeout(60_000));
  assert.ok(["committed", "fallback", "reused", "skipped"].includes(first[0]!.kind));
  const second = await edge.send(move(), AbortSignal.timeout(60_000));
  const o = second[0]!;
  assert.equal(o.kind, "skipped", text(o));
  assert.equal(o.skip?.code, "AMBIENCE_FRESH");
  assert.ok(o.skip?.retryAtUtc !== undefined && Date.parse(o.skip.retryAtUtc) > Date.now() - 60_000);
});

test("the long poll tells an unknown event apart", async () => {
  const s = await edge.outcome(uuid7(), { waitSeconds: 0 });
  assert.equal(s.state, "unknown");
  await assert.rejects(edge.awaitOutcome(uuid7()), (e: unknown) => e instanceof EdgeError && e.status === 404);
});

test("a bad envelope is refused naming the field", async () => {
  const env = newEnvelope("Player.SpokeToNPC", { kind: "player", id: "player:cass" },
    { playerId: "player:cass", npcId: "npc:oren", locationId: "loc:tavern", utterance: "hi" });
  (env.payload as Record<string, unknown>)["npcId"] = "oren"; // not an npc: id
  await assert.rejects(edge.publish(env), (e: unknown) =>
    e instanceof EdgeError && e.status === 400 && (e.problem?.errors ?? []).some((f) => f.field === "/payload/npcId"));
});

test("the outcome stream resumes after its cursor: nothing lost, nothing repeated", async () => {
  const actor = "player:ana";
  const start = new Date(Date.now() - 1000);
  const sent = [];
  for (const utterance of ["Who keeps the gate?", "And after dark?"]) {
    const env = newEnvelope("Player.SpokeToNPC", { kind: "player", id: actor },
      { playerId: actor, npcId: "npc:mara", locationId: "loc:ash-gate", utterance }, { correlationId: `ts-stream-${uuid7()}` });
    await edge.send(env, AbortSignal.timeout(60_000));
    sent.push(env);
  }
  const filter = { actor: [actor], correlationId: sent.map((e) => e.correlationId) };
  const read = async (after?: string) => {
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), 30_000);
    try {
      for await (const s of edge.outcomes({ ...filter, ...(after === undefined ? { since: start } : { after }) }, ac.signal)) {
        ac.abort(); // one is enough: the next read resumes after it
        return s;
      }
    } finally {
      clearTimeout(timer);
    }
    throw new Error("the stream ended without an outcome");
  };
  const first = await read();
  assert.equal(first.outcome.eventId, sent[0]!.eventId);
  const second = await read(first.cursor);
  assert.equal(second.outcome.eventId, sent[1]!.eventId);
  assert.ok(Number(second.cursor) > Number(first.cursor));
});
