// The /play console: a game client on edge's public API. Every text from the world or the AI
// goes through textContent (text(), below): nothing is ever parsed as HTML.
"use strict";

const state = { key: "", player: "", location: "", npc: "", cursor: "", pending: new Map(), location_data: null };

// HISTORY_MS is how far back the feed starts when the page (re)loads.
const HISTORY_MS = 60 * 60 * 1000;

function $(id) { return document.getElementById(id); }

// el builds an element whose content is text, never markup.
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

// uuidv7 is a time-ordered UUID (RFC 9562), as the envelope requires.
function uuidv7() {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  let ms = Date.now();
  for (let i = 5; i >= 0; i--) { b[i] = ms % 256; ms = Math.floor(ms / 256); }
  b[6] = (b[6] & 0x0f) | 0x70;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

// say adds a line to the feed: oldest first, as the list numbers them, the newest in view.
function say(text, cls) {
  const li = el("li", text, cls);
  $("feed").append(li);
  if (li.scrollIntoView) li.scrollIntoView({ block: "nearest" });
  return li;
}

async function publish(type, payload, label) {
  const id = uuidv7();
  const env = {
    specVersion: "1.0", eventId: id, type, occurredUtc: new Date().toISOString(), source: "play-console",
    actor: { kind: "player", id: state.player }, correlationId: id, idempotencyKey: id, payload,
  };
  state.pending.set(id, { type, label });
  journey(id, label, "sent");
  const r = await fetch("/v1/events", {
    method: "POST",
    headers: { "Authorization": "Bearer " + state.key, "Content-Type": "application/json", "Idempotency-Key": id },
    body: JSON.stringify(env),
  });
  if (r.status !== 202) {
    const p = await r.json().catch(() => ({}));
    say(`not sent: ${p.title || r.status} ${p.detail || ""}`, "refused");
    journey(id, label, `refused by edge: ${p.detail || r.status}`);
  }
  return id;
}

// journey shows one event's way through Worldgate in the side panel.
function journey(id, label, what, o) {
  let li = document.getElementById("j-" + id);
  if (!li) {
    li = el("li", null, "journey");
    li.id = "j-" + id;
    li.append(el("div", label, "mine"));
    $("journey-list").prepend(li);
  }
  if (!o) { li.append(el("div", what)); return; }
  const j = o.journey || { attempt: 0, tokens: { prompt: 0, completion: 0 }, costUsd: 0 };
  li.append(el("div", `${o.kind} — ${o.agentRole || ""} ${o.proposalKind || ""}`, o.kind));
  const gates = el("div", null, "gates");
  // A fallback's gates are those its static content passed; the model's refused answers are
  // told by fallbackReason below.
  if (o.kind === "fallback") gates.append(el("span", "fallback content:"));
  for (const h of j.gates || []) {
    gates.append(el("span", `${h.gate} ${h.outcome}${h.code ? " " + h.code : ""} (${(h.durationMs || 0).toFixed(1)} ms)`, "gate-" + h.outcome));
  }
  if (o.refusal) gates.append(el("span", `refused by ${o.refusal.gate}: ${o.refusal.code} — ${o.refusal.reason}`, "gate-rejected"));
  if (o.skip) gates.append(el("span", `not acted on by ${o.agentRole || "its role"}: ${o.skip.code} — ${o.skip.reason}${askAgain(o.skip)}`, "gate-skipped"));
  li.append(gates);
  // attempt counts the answers before this one; a fallback is the attempt after the last reprompt.
  const reprompts = o.kind === "fallback" ? Math.max(j.attempt - 1, 0) : j.attempt;
  if (reprompts > 0) li.append(el("div", `reprompts: ${reprompts}`, "reprompts"));
  if (o.fallbackReason) li.append(el("div", `fallback used: ${o.fallbackReason}`, "fallback"));
  const attempts = reprompts > 0 || o.kind === "fallback" || o.kind === "reused";
  li.append(el("div", `${attempts ? "final attempt: " : ""}model ${j.model || "—"} · tokens ${j.tokens.prompt}+${j.tokens.completion} · $${(j.costUsd || 0).toFixed(6)}`));
  // The outcome tells its final attempt only: the attempts the gates refused before it, and
  // what the whole request cost, come from edge's journey of the event.
  if (attempts && o.proposalId) attemptsOf(li, o.eventId);
}

// attemptsOf adds to li every attempt made for event id — the gates' decisions on each, the
// refused ones included — and what the request cost in all (GET /v1/events/{id}/journey).
async function attemptsOf(li, id) {
  let r;
  // A reload asks for many at once: over the key's rate, wait as edge says and ask again.
  for (let i = 0; i < 5; i++) {
    r = await fetch(`/v1/events/${encodeURIComponent(id)}/journey`, { headers: { "Authorization": "Bearer " + state.key } });
    if (r.status !== 429) break;
    await new Promise((res) => setTimeout(res, 1000 * Number(r.headers.get("Retry-After") || 1)));
  }
  if (!r.ok) { li.append(el("div", `attempts: not available (${r.status})`)); return; }
  const jr = await r.json();
  const box = el("div", null, "attempts");
  for (const a of jr.attempts || []) {
    const row = el("div", null, "gates");
    row.append(el("span", `attempt ${a.attempt}${a.fallback ? " (fallback content)" : ""} — ${a.result}:`));
    for (const h of a.gates || []) {
      row.append(el("span", `${h.gate} ${h.outcome}${h.code ? " " + h.code : ""}`, "gate-" + h.outcome));
    }
    for (const x of a.refusals || []) {
      if (!(a.gates || []).some((h) => h.gate === x.gate && h.outcome === "rejected")) {
        row.append(el("span", `${x.gate} rejected ${x.code}`, "gate-rejected"));
      }
    }
    row.append(el("span", `tokens ${a.tokens.prompt}+${a.tokens.completion} · $${(a.costUsd || 0).toFixed(6)}`));
    box.append(row);
  }
  // A refused outcome does not say whether its last proposal was the fallback content (refused
  // too); the attempts do: the reprompts are the model's answers after its first.
  const answers = (jr.attempts || []).filter((a) => !a.fallback).length;
  const rp = li.querySelector(".reprompts");
  if (rp && answers > 0) rp.textContent = `reprompts: ${answers - 1}`;
  box.append(el("div", `whole request: ${(jr.attempts || []).length} attempts · tokens ${jr.tokens.prompt}+${jr.tokens.completion} · $${(jr.costUsd || 0).toFixed(6)}`, "total"));
  li.append(box);
}

function npcName(id) {
  const loc = state.location_data;
  const o = loc && (loc.occupants || []).find((x) => x.id === id);
  return o ? o.name : id;
}

// askAgain says when a skipped request may be acted on again.
function askAgain(skip) {
  return skip.retryAtUtc ? ` (ask again after ${new Date(skip.retryAtUtc).toLocaleTimeString()})` : "";
}

function show(o) {
  const mine = state.pending.get(o.eventId);
  journey(o.eventId, mine ? mine.label : o.eventId, "", o);
  if (o.kind === "refused") {
    say(`✗ ${o.refusal.gate} refused: ${o.refusal.reason}`, "refused");
    return;
  }
  if (o.kind === "skipped") {
    // The role decided not to act on the event: nothing more will come for it.
    say(`· skipped: ${o.skip.reason}${askAgain(o.skip)}`, "skipped");
    return;
  }
  const p = (o.event && o.event.payload) || {};
  const cls = o.kind;
  if (!o.event) { say(o.kind, cls); return; }
  switch (o.event.type) {
    case "NPCDialogueAccepted": say(`${npcName(p.npcId)}: “${p.line}”`, cls); break;
    case "AmbienceGenerated": say(`(${p.mood}) ${p.text}`, cls); break;
    case "QuestSeeded": say(`Quest — ${p.title}: ${p.hook}`, cls); break;
    case "PlayerMoved":
      say(`You go ${p.direction}.`, cls);
      if (mine && p.toLocationId) {
        // The move is committed: the game tells Worldgate the player arrived (ambience follows).
        publish("Player.Moved", { playerId: state.player, fromLocationId: p.fromLocationId, toLocationId: p.toLocationId, direction: p.direction }, `arrive at ${p.toLocationId}`);
        go(p.toLocationId);
      }
      break;
    default: say(`${o.event.type}`, cls);
  }
}

async function go(id) {
  const r = await fetch("/play/location/" + encodeURIComponent(id));
  if (!r.ok) { say(`cannot read ${id}: ${await r.text()}`, "refused"); return; }
  const loc = await r.json();
  state.location = id;
  state.location_data = loc;
  state.npc = "";
  $("loc-name").textContent = loc.name;
  $("loc-desc").textContent = loc.description;
  const exits = $("exits");
  exits.replaceChildren();
  for (const x of loc.exits || []) {
    const b = el("button", `${x.direction} → ${x.toName || x.to || ""}`);
    b.dataset.direction = x.direction;
    b.addEventListener("click", () => publish("Player.MoveRequested", { playerId: state.player, fromLocationId: state.location, direction: x.direction }, `move ${x.direction} from ${state.location}`));
    exits.append(b);
  }
  const npcs = $("npcs");
  npcs.replaceChildren();
  for (const o of (loc.occupants || []).filter((o) => o.kind === "NPC")) {
    const b = el("button", o.name);
    b.dataset.npc = o.id;
    b.addEventListener("click", () => {
      state.npc = o.id;
      for (const c of npcs.children) c.classList.toggle("selected", c === b);
      $("talk-to").textContent = "to " + o.name;
      $("say").disabled = false;
    });
    npcs.append(b);
  }
  $("talk-to").textContent = "";
  $("say").disabled = true;
}

// stream reads GET /v1/outcomes as Server-Sent Events over fetch (so the key travels in a
// header), resuming after the last cursor when the connection ends.
async function stream() {
  for (;;) {
    try {
      const headers = { "Authorization": "Bearer " + state.key };
      let url = "/v1/outcomes?actor=" + encodeURIComponent(state.player);
      // First connection: the last hour's outcomes, so a reload keeps the player's history.
      if (state.cursor) headers["Last-Event-ID"] = state.cursor;
      else url += "&since=" + encodeURIComponent(new Date(Date.now() - HISTORY_MS).toISOString());
      const r = await fetch(url, { headers });
      if (!r.ok) throw new Error("outcomes: " + r.status);
      $("status").textContent = "live";
      const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          let type = "message", id = "", data = "";
          for (const line of block.split("\n")) {
            if (line.startsWith(":")) continue;
            const k = line.indexOf(":");
            const f = k < 0 ? line : line.slice(0, k);
            const v = k < 0 ? "" : line.slice(k + 1).replace(/^ /, "");
            if (f === "event") type = v; else if (f === "id") id = v; else if (f === "data") data += (data ? "\n" : "") + v;
          }
          if (type === "outcome" && data) {
            if (id) state.cursor = id;
            show(JSON.parse(data));
          }
        }
      }
    } catch (e) {
      $("status").textContent = "reconnecting… " + e.message;
    }
    await new Promise((res) => setTimeout(res, 1000));
  }
}

async function main() {
  const cfg = await (await fetch("/play/config.json")).json();
  state.key = cfg.key;
  state.player = cfg.player;
  $("who").textContent = "playing as " + cfg.player;
  $("talk").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const words = $("utterance").value.trim();
    if (!words || !state.npc) return;
    say(`You: ${words}`, "mine");
    publish("Player.SpokeToNPC", { playerId: state.player, npcId: state.npc, locationId: state.location, utterance: words }, `say to ${state.npc}: ${words}`);
    $("utterance").value = "";
  });
  $("quest").addEventListener("click", () => publish("Quest.SeedRequested", { locationId: state.location, playerId: state.player }, `quest at ${state.location}`));
  stream();
  await go(cfg.start);
}

main();
