// klaw web page: chat with streamed replies, memory inspector, memory browser and search, settings.
// Plain JavaScript, no build step: ES modules, this one the page's entry (index.html), each other with one
// job and importing only those below it (decision 458): core.js ← bubbles.js ← sending.js ← approvals.js ←
// history.js ← status.js, events.js; alive.js ← sending.js; core.js ← chats.js ← inspector.js, memory.js.
// This one wires them to the page: the session, the tabs (and the Settings one), the composer. Text from
// messages is only ever set with textContent, except a reply's `html`: the gateway rendered it from Markdown
// and sanitized it (channels/web/markdown.py), and the page's Content-Security-Policy runs no inline script
// whatever it holds.
import { api, el, showError, state, table } from "./core.js";
import { keepOutbox, send, stored } from "./sending.js";
import { loadHistory } from "./history.js";
import { refreshStatus } from "./status.js";
import { openEvents } from "./events.js";
import { loadChats } from "./chats.js";
import { loadTurns } from "./inspector.js";
import { loadSegments, search } from "./memory.js";

// The Settings tab: the effective configuration, each value with where it came from.
async function loadSettings() {
  const container = document.getElementById("settings");
  try {
    const { settings, note } = await api("/api/settings");
    const shown = table([["field"], ["value"], ["source"]],
      settings.map((row) => [[row.field], [row.shown, "text"], [row.source, row.command ? "overridden" : ""]]));
    container.replaceChildren(...(note ? [el("p", { class: "hint", text: note })] : []), shown);
  } catch (error) { showError(container, error); }
}

const loaders = { inspector: async () => { await loadChats(); await loadTurns(); }, memory: async () => { await loadChats(); await loadSegments(); }, settings: loadSettings };

function showTab(name) {
  for (const button of document.querySelectorAll("nav button")) {
    button.classList.toggle("active", button.dataset.tab === name);
    button.setAttribute("aria-selected", String(button.dataset.tab === name));  // for screen readers (role=tab)
  }
  for (const section of document.querySelectorAll(".tab")) section.classList.toggle("active", section.id === `tab-${name}`);
  if (loaders[name]) loaders[name]();
}

async function main() {
  const session = await api("/api/session");
  state.csrf = session.csrf;
  state.chat = { channel: session.channel, chat_id: session.chat_id };
  document.getElementById("logout-csrf").value = session.csrf;
  for (const button of document.querySelectorAll("nav button")) button.addEventListener("click", () => showTab(button.dataset.tab));
  const input = document.getElementById("input");
  document.getElementById("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = input.value;
    if (!text.trim()) return;
    input.value = "";
    send(text);
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); document.getElementById("composer").requestSubmit(); }
  });
  document.getElementById("inspector-refresh").addEventListener("click", loadTurns);
  document.getElementById("inspector-chat").addEventListener("change", loadTurns);
  document.getElementById("memory-chat").addEventListener("change", loadSegments);
  document.getElementById("search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    search(document.getElementById("search-text").value);
  });
  document.addEventListener("klaw:queued", () => refreshStatus());  // sending.js: a message was queued
  // Messages typed while klaw was away are kept in the browser (sending.js): leaving asks first only when
  // the browser would not keep them (storage refused).
  window.addEventListener("beforeunload", (event) => { if (state.outbox.length && !stored) event.preventDefault(); });
  openEvents(await loadHistory());
  await keepOutbox(session.outbox);  // after the history: what a closed tab left is shown below it, then sent
  refreshStatus();
  setInterval(refreshStatus, 5000);
  document.body.dataset.ready = "true";
}

document.addEventListener("DOMContentLoaded", main);
