// Runs the console's app.js with a minimal DOM and shows it the outcomes given on stdin (JSON
// array), after marking their events as sent from this page; prints what the feed and the
// journey panel say, as JSON. Used by TestConsoleShowsEveryOutcomeKind.
"use strict";
const fs = require("fs");
const vm = require("vm");

const all = [];
function element(tag) {
  const e = {
    tagName: tag, id: "", className: "", textContent: "", children: [], dataset: {}, disabled: false, value: "",
    classList: { toggle() {} },
    append(...c) { this.children.push(...c); },
    prepend(...c) { this.children.unshift(...c); },
    replaceChildren() { this.children = []; },
    addEventListener() {},
  };
  all.push(e);
  return e;
}
const document = {
  createElement: element,
  getElementById(id) {
    let e = all.find((x) => x.id === id);
    if (!e && !id.startsWith("j-")) { e = element("div"); e.id = id; }
    return e || null;
  },
};
const text = (e) => [e.textContent, ...e.children.map(text)].filter(Boolean).join(" | ");
const ctx = vm.createContext({
  document, console, crypto: require("crypto").webcrypto, setTimeout, TextDecoderStream: class {},
  fetch: () => new Promise(() => {}), // the page's own requests never answer here
});
vm.runInContext(fs.readFileSync(process.argv[2], "utf8"), ctx);
const outcomes = JSON.parse(fs.readFileSync(0, "utf8"));
const state = vm.runInContext("state", ctx);
for (const o of outcomes) {
  state.pending.set(o.eventId, { type: "Player.Moved", label: "arrive at " + (o.locationId || "?") });
  vm.runInContext("journey", ctx)(o.eventId, "arrive", "sent");
  ctx.show(o);
}
const feed = document.getElementById("feed");
const journeys = document.getElementById("journey-list");
process.stdout.write(JSON.stringify({
  feed: feed.children.map((li) => ({ text: text(li), cls: li.className })),
  journeys: journeys.children.map(text),
}));
