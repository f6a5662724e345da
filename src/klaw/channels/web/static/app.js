// klaw web page: chat with streamed replies, memory inspector, memory browser and search, settings.
// Plain JavaScript, no build step. Text from messages is only ever set with textContent, except a reply's
// `html`: the gateway rendered it from Markdown and sanitized it (channels/web/markdown.py), and the page's
// Content-Security-Policy runs no inline script whatever it holds.
"use strict";

// bubbles: reply_to → the reply bubble being written; answered: ids whose reply came before the POST said
// which id the message got (a fast reply), so `send` can still mark its message answered (class `answered`).
// lastEvent: the number of the last event shown (or the history's cursor); skipTo: events.js. sending: the
// sends whose POST has not answered (their bubbles have no id yet); away: the engine was seen gone since the
// page last read the history (catchUp).
const state = { csrf: "", chat: { channel: "web", chat_id: "main" }, bubbles: new Map(), answered: new Set(), shown: new Set(), chats: [], lastEvent: null, skipTo: null, sending: new Set(), away: false };
const SVG = "http://www.w3.org/2000/svg";
// Each context layer keeps its colour in every turn (style.css .layer-N); an unknown one is grey.
const LAYERS = ["system_prompt", "core_memory", "summary", "past_conversations", "auto_rag", "sliding_window", "tools", "pending", "skills"];
function layerClass(name) { const index = LAYERS.indexOf(name); return `layer-${index < 0 ? LAYERS.length : index}`; }

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return node;
}

async function api(path, options = {}) {
  const init = { credentials: "same-origin", headers: {}, ...options };
  if (init.body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.headers["X-CSRF-Token"] = state.csrf;
    init.body = JSON.stringify(init.body);
  }
  const response = await fetch(path, init);
  if (response.status === 401) { window.location.assign("/login"); throw new Error("signed out"); }
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(data.detail || `HTTP ${response.status}`);
  return data;
}

function fmtTime(iso) { return iso ? new Date(iso).toLocaleString() : ""; }
function fmtNum(value, digits) { return value === null || value === undefined ? "–" : Number(value).toFixed(digits); }
function table(headers, rows) {
  const head = el("tr", {}, ...headers.map(([label, cls]) => el("th", { class: cls || "", text: label })));
  // Each cell carries its column's name: on a phone a row is shown as a card of "name: value" lines (style.css).
  const body = rows.map((cells) => el("tr", {}, ...cells.map(([value, cls], i) =>
    el("td", { class: cls || "", "data-label": headers[i] ? headers[i][0] : "" }, value instanceof Node ? value : String(value ?? "")))));
  return el("div", { class: "table-wrap" }, el("table", {}, el("thead", {}, head), el("tbody", {}, ...body)));
}
function showError(container, error) { container.replaceChildren(el("p", { class: "error", text: error.message })); }

// ---- chat -------------------------------------------------------------------------------------------

function addBubble(kind, text, meta) {
  const box = document.getElementById("messages");
  const bubble = el("div", { class: `msg ${kind}` }, el("div", { class: "body", text }));
  if (meta) bubble.append(el("span", { class: "meta", text: meta }));
  box.append(bubble);
  box.scrollTop = box.scrollHeight;
  return bubble;
}

// A finished reply: sanitized HTML from the server when it rendered Markdown, else the plain text;
// a message the agent sent unasked is headed with whose it is: its task, or the chat it was written in.
function fillReply(bubble, data) {
  const body = bubble.querySelector(".body");
  if (typeof data.html === "string") {
    body.innerHTML = data.html;
    bubble.classList.add("markdown");
  } else {
    body.textContent = data.text;
  }
  bubble.querySelector(".task-label")?.remove();
  const label = data.task_label || (data.task ? `Scheduled task: ${data.task}` : null);
  if (label) {
    bubble.classList.add("task");
    bubble.prepend(el("span", { class: "task-label", text: label }));
  }
}

// A question to approve a held tool: two buttons that send `/approve ID` or `/deny ID` as if typed. Once
// one is clicked the question says which, and its line of time left to answer goes: before, greyed
// buttons stayed under "no answer in the 4 minutes 57 seconds left means no" (newcomer13). The engine's
// notice below it says what came of the answer.
function addApprovalButtons(bubble, id) {
  const answer = (command) => () => {
    const box = bubble.querySelector(".approval");
    if (box.dataset.answered) return;
    box.dataset.answered = command;
    for (const line of bubble.querySelectorAll(".body p")) {
      if (line.textContent.includes(`/approve ${id}`)) line.remove();
    }
    box.replaceChildren(el("span", { class: "closed", text: command === "approve" ? "You chose Approve." : "You chose Deny." }));
    send(`/${command} ${id}`);
  };
  bubble.append(el("div", { class: "approval", "data-id": id },
    el("button", { type: "button", class: "approve", text: "Approve", onclick: answer("approve") }),
    el("button", { type: "button", class: "deny", text: "Deny", onclick: answer("deny") })));
}

// A reply ends its turn, so a question of that turn still offered is over (its time ran out, or another
// tab answered it). Which ones is the engine's to say: a reply can be an older one shown late (it arrived
// while the page loaded, after a later question was shown), which must not close that question. Only the
// questions offered when the engine is asked can be closed by its answer: one shown while the answer was
// on its way (a later turn's) is not in it, though it waits (adversary16), and keeps its buttons.
async function closeQuestions() {
  const unanswered = (offered) => !offered.dataset.answered;
  const offered = [...document.querySelectorAll("#messages .approval")].filter(unanswered);
  if (!offered.length) return;
  let waiting;
  try {
    waiting = new Set((await api("/api/approvals")).approvals.map((question) => question.id));
  } catch (error) { return; }  // unknown: keep the buttons; a late click is answered in words
  for (const question of offered) {
    if (!unanswered(question) || waiting.has(question.dataset.id)) continue;  // answered here, or still waiting
    question.replaceChildren(el("span", { class: "closed", text: "No longer waiting for an answer." }));
  }
}

// A message the agent answered shows the time it was sent, as the history shows earlier ones (a queued
// message's note gives way to it); the class is what marks it answered.
function markAnswered(id) {
  const sent = document.querySelector(`.msg.user[data-id="${CSS.escape(id)}"]`);
  if (sent) answered(sent);
  else state.answered.add(id);  // the POST has not told us this message's id yet
}

function answered(bubble) {
  bubble.classList.add("answered");
  if (bubble.dataset.queued) storedTime(bubble);
  else bubble.querySelector(".meta").textContent = fmtTime(bubble.dataset.at);
}

// A message queued while the engine was down is stored, with its time, when the engine comes back: that
// time is what the history shows after a reload, so the page shows it here too, read back from the
// history, rather than the browser's time of sending (live 9:25:25, reloaded 9:25:50: decision 446).
async function storedTime(bubble) {
  let at = bubble.dataset.at;
  try {
    const stored = (await api("/api/history")).messages.find((message) => message.id === bubble.dataset.id);
    if (stored) at = bubble.dataset.at = stored.created_at;
  } catch (error) { /* the engine went again: the time it was sent, until a reload */ }
  bubble.querySelector(".meta").textContent = fmtTime(at);
}

// The tool calls the reply's turn made, as klaw chat shows them ("Tools used: memory_search, file_read ×2",
// worded by the gateway: engine/tools_used.py). Live replies carry the line, and so do replies in the history.
function showTools(bubble, line) {
  bubble.querySelector(".tools")?.remove();
  if (line) bubble.querySelector(".body").after(el("div", { class: "tools", text: line }));
}

// A finished reply, notice or error gets its time under it, as the history shows earlier ones.
function stamp(bubble, at) {
  let meta = bubble.querySelector(":scope > .meta");
  if (!meta) bubble.append(meta = el("span", { class: "meta" }));
  meta.textContent = fmtTime(at);
}

async function send(text) {
  const bubble = addBubble("user", text, "sending…");
  const posted = api("/api/messages", { method: "POST", body: { text } });
  state.sending.add(posted);
  try {
    const result = await posted;
    bubble.dataset.id = result.id;
    bubble.dataset.at = new Date().toISOString();
    if (result.queued) bubble.dataset.queued = "true";
    if (state.answered.delete(result.id)) answered(bubble);
    else bubble.querySelector(".meta").textContent = result.queued ? "queued: the engine is offline" : fmtTime(bubble.dataset.at);
    if (result.queued) {
      state.away = true;
      refreshStatus();  // the header counts it now, not at the next 5-second refresh
    }
  } catch (error) {
    bubble.classList.add("error");
    bubble.querySelector(".meta").textContent = `not sent: ${error.message}`;
  } finally {
    state.sending.delete(posted);
  }
}

// The chat so far, so a reload or a new sign-in does not open on an empty page. Older messages than
// these are in the Memory tab; a line marks where `/new` started a new conversation. Without the engine
// the history cannot be read: the line saying so is marked, and the history shown when the engine is back.
async function loadHistory() {
  const box = document.getElementById("messages");
  try {
    const { messages, complete, approvals, event_cursor: cursor } = await api("/api/history");
    placeHistory(messages, complete, approvals, (node) => box.append(node));
    box.scrollTop = box.scrollHeight;
    return cursor;
  } catch (error) {
    box.append(el("p", { class: "hint history-missing", text: `Earlier messages could not be shown: ${error.message}` }));
  }
  box.scrollTop = box.scrollHeight;
  return null;
}

// The history's messages, each placed by `place` unless it is on the page already (it came live: a message
// sent, its reply): that one is handed to `found` instead, so the next ones can go after it (catchUp).
function placeHistory(messages, complete, approvals, place, found = () => {}) {
  if (!complete) place(el("p", { class: "hint", text: "Earlier messages are in the Memory tab." }));
  let segment = null;
  for (const message of messages) {
    const divided = segment !== null && message.segment_id !== segment;
    segment = message.segment_id;
    const shown = message.id ? document.querySelector(`#messages .msg${message.role === "user" ? ".user" : ":not(.user)"}[data-id="${CSS.escape(message.id)}"]`) : null;
    if (shown) { found(shown); continue; }
    if (divided) place(el("div", { class: "divider", text: "new conversation" }));
    const bubble = addBubble(message.role === "user" ? "user" : "assistant", message.role === "user" ? message.text : "", fmtTime(message.created_at));
    if (message.id) bubble.dataset.id = message.id;
    if (message.role !== "user") {
      fillReply(bubble, message);
      if (message.id) state.shown.add(message.id);
    }
    showTools(bubble, message.tools_line);  // a user message's: its turn called these, then failed
    place(bubble);
  }
  // Questions still waiting for an answer (asked before this load): shown with their buttons again.
  for (const question of approvals || []) {
    if (state.shown.has(`approval:${question.id}`)) continue;
    const bubble = addBubble("notice", "");
    fillReply(bubble, question);
    addApprovalButtons(bubble, question.id);
    state.shown.add(`approval:${question.id}`);
    place(bubble);
  }
}

// The engine is back (the status says so, or a reply came) after the page loaded without it, or after it was
// seen gone, or a reply answers a message this page does not show (another tab sent it): the page reads the
// history and shows what the chat holds that it does not, each in order after the last message it already
// shows before it (found by id), none twice. A page that loaded without the engine has the history go where the
// line saying it could not be shown was (decision 446); one that had its history missed the messages other
// tabs sent while the engine was away, as only replies are streamed (decision 452). Sends under way are waited
// for first: their bubbles get their ids when the POST answers, and would otherwise be shown again.
let catching = null;
let catchAgain = false;
async function catchUp() {
  if (catching) { catchAgain = true; return catching; }
  catching = (async () => {
    do { catchAgain = false; await placeMissing(); } while (catchAgain);
  })();
  try { await catching; } finally { catching = null; }
}

async function placeMissing() {
  await Promise.allSettled([...state.sending]);
  const box = document.getElementById("messages");
  const missing = box.querySelector(".history-missing");
  try {
    const { messages, complete, approvals } = await api("/api/history");
    state.away = false;
    let at = missing;  // null: before the first message the page shows
    const place = (node) => { if (at) at.after(node); else box.prepend(node); at = node; };
    placeHistory(messages, missing ? complete : true, approvals, place, (shown) => { at = shown; });
    missing?.remove();
    box.scrollTop = 1e9;
  } catch (error) { /* still not there: the line stays, and the next status check or reply tries again */ }
}

// Whether a live reply, notice or error asks for the history: the page could not read it, the engine was seen
// gone since, or the message it answers is not on this page (sent from another tab).
async function catchUpAfter(replyTo) {
  if (document.querySelector("#messages .history-missing") || state.away) { catchUp(); return; }
  if (!replyTo) return;
  await Promise.allSettled([...state.sending]);  // this page's own message may not have its id yet
  if (!document.querySelector(`#messages .msg.user[data-id="${CSS.escape(replyTo)}"]`)) catchUp();
}

// ---- inspector --------------------------------------------------------------------------------------

function selectedChat(selectId) {
  const value = document.getElementById(selectId).value;
  return state.chats[Number(value)] || state.chat;
}

function chatQuery(chat) { return `channel=${encodeURIComponent(chat.channel)}&chat_id=${encodeURIComponent(chat.chat_id)}`; }

async function loadChats() {
  try {
    state.chats = (await api("/api/chats")).chats;
  } catch (error) {
    state.chats = [state.chat];
  }
  for (const select of document.querySelectorAll(".chat-select")) {
    const previous = select.value;
    select.replaceChildren(...state.chats.map((chat, index) => el("option", { value: String(index), text: `${chat.channel}:${chat.chat_id}` })));
    if (previous && Number(previous) < state.chats.length) select.value = previous;
  }
}

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  node.append(...children);
  return node;
}

// The turn's context at a glance: one bar for the whole token budget, a coloured block per layer in
// the order the prompt holds them, the rest of the budget left pale (or a red edge when over it).
function contextBar(turn) {
  const scale = Math.max(turn.budget, turn.total_tokens, 1);
  const bar = svg("svg", { class: "context-bar", viewBox: "0 0 1000 36", preserveAspectRatio: "none", role: "img",
    "aria-label": `${turn.total_tokens} of ${turn.budget} tokens used` });
  bar.append(svg("rect", { class: "budget", x: 0, y: 0, width: 1000 * turn.budget / scale, height: 36 }));
  let x = 0;
  for (const layer of turn.layers) {
    const width = 1000 * layer.tokens / scale;
    if (width <= 0) continue;
    bar.append(svg("rect", { class: `layer ${layerClass(layer.name)}`, "data-layer": layer.name, x, y: 4, width, height: 28 },
      svg("title", {}, `${layer.name}: ${layer.tokens} tokens, ${layer.items} item(s)`)));
    x += width;
  }
  if (turn.total_tokens > turn.budget) bar.append(svg("rect", { class: "over", x: 1000 * turn.budget / scale - 2, y: 0, width: 4, height: 36 }));
  return bar;
}

function scoreBar(score, best) {
  const meter = el("span", { class: "score-bar" });
  const fill = el("span", { class: "score-fill" });
  fill.style.width = `${best > 0 && score !== null ? Math.round(100 * score / best) : 0}%`;
  meter.append(fill);
  return el("span", { class: "score" }, meter, fmtNum(score, 4));
}

function renderTurn(turn) {
  const box = el("article", { class: "turn" });
  const percent = turn.budget ? Math.round(100 * turn.total_tokens / turn.budget) : 0;
  box.append(el("h3", { text: `${fmtTime(turn.at)} · ${turn.model} · ${turn.total_tokens} of ${turn.budget} tokens (${percent}%)` }));
  box.append(contextBar(turn));
  box.append(table([["", "key"], ["layer"], ["tokens", "num"], ["share", "num"], ["items", "num"]],
    turn.layers.map((layer) => [[el("span", { class: `swatch ${layerClass(layer.name)}` }), "key"], [layer.name],
      [String(layer.tokens), "num"], [`${turn.budget ? Math.round(100 * layer.tokens / turn.budget) : 0}%`, "num"], [String(layer.items), "num"]])));
  // The tools layer tool by tool: every schema is sent with every call, so this is where tokens go unseen.
  const tools = turn.layers.find((layer) => layer.name === "tools" && (layer.parts || []).length);
  if (tools) {
    const details = el("details", { class: "tool-parts" });
    details.append(el("summary", { text: `Tools offered: ${tools.items}, ${tools.tokens} tokens` }));
    details.append(table([["tool"], ["tokens", "num"]],
      [...tools.parts].sort((a, b) => b.tokens - a.tokens).map((part) => [[part.name], [String(part.tokens), "num"]])));
    box.append(details);
  }
  // What past conversations were recalled, by id and first words (decision 445).
  const past = turn.layers.find((layer) => layer.name === "past_conversations" && (layer.parts || []).length);
  if (past) {
    const details = el("details", { class: "tool-parts" });
    details.append(el("summary", { text: `Past conversations recalled: ${past.tokens} tokens` }));
    details.append(table([["segment, exchange or message"], ["tokens", "num"]],
      past.parts.map((part) => [[part.name], [String(part.tokens), "num"]])));
    box.append(details);
  }
  if (turn.recalled.length) {
    const best = Math.max(...turn.recalled.map((hit) => hit.score || 0));
    box.append(el("h4", { text: "Auto-RAG recalled (best first)" }));
    box.append(table([["#", "num"], ["score"], ["distance", "num"], ["full-text rank", "num"], ["role"], ["text"]],
      turn.recalled.map((hit, index) => [[String(index + 1), "num"], [scoreBar(hit.score, best)], [fmtNum(hit.distance, 3), "num"],
        [hit.fts_rank === null ? "–" : `#${hit.fts_rank}`, "num"], [hit.role], [hit.text + (hit.truncated ? " …" : ""), "text"]])));
  } else {
    box.append(el("p", { class: "hint", text: "No auto-RAG hits for this turn." }));
  }
  for (const warning of turn.warnings) box.append(el("p", { class: "error", text: warning }));
  return box;
}

async function loadTurns() {
  const container = document.getElementById("turns");
  try {
    const { turns } = await api(`/api/turns?${chatQuery(selectedChat("inspector-chat"))}`);
    container.replaceChildren(...(turns.length ? turns.map(renderTurn)
      : [el("p", { class: "hint", text: "No turn of this chat since the engine started." })]));
  } catch (error) { showError(container, error); }
}

// ---- memory -----------------------------------------------------------------------------------------

async function loadSegments() {
  const container = document.getElementById("segments");
  document.getElementById("segment-detail").replaceChildren();
  try {
    const { segments } = await api(`/api/segments?${chatQuery(selectedChat("memory-chat"))}`);
    const rows = segments.map((s) => el("tr", { class: "clickable", onclick: () => loadSegment(s.id) },
      el("td", { class: "num", text: String(s.number), "data-label": "segment" }),
      el("td", { class: "num", text: String(s.id), "data-label": "id" }),
      el("td", { text: fmtTime(s.started_at), "data-label": "started" }),
      el("td", { text: s.ended_at ? fmtTime(s.ended_at) : "open", "data-label": "ended" }),
      el("td", { class: "num", text: String(s.messages), "data-label": "messages" })));
    container.replaceChildren(el("div", { class: "table-wrap" }, el("table", {}, el("thead", {}, el("tr", {}, el("th", { class: "num", text: "segment" }),
      el("th", { class: "num", text: "id", title: "what /forget segment ID takes; the number is for /forget segment number N" }),
      el("th", { text: "started" }), el("th", { text: "ended" }), el("th", { class: "num", text: "messages" }))), el("tbody", {}, ...rows))));
  } catch (error) { showError(container, error); }
}

async function loadSegment(id) {
  const container = document.getElementById("segment-detail");
  try {
    const data = await api(`/api/segments/${id}`);
    container.replaceChildren(
      // Both figures, as `klaw memory list` names it (decision 402): the id is what `/forget segment` takes.
      el("h2", { text: data.segment.number ? `Segment ${data.segment.number} (id ${id})` : `Segment id ${id}` }),
      el("h3", { text: "Exchanges" }),
      table([["#", "num"], ["status"], ["started"], ["user"], ["reply"]],
        data.exchanges.map((e) => [[String(e.id), "num"], [e.status], [fmtTime(e.started_at)], [e.user_text ?? "", "text"], [e.reply_text ?? "", "text"]])),
      el("h3", { text: "Summaries" }),
      data.summaries.length ? table([["summary"]], data.summaries.map((s) => [[s.text, "text"]]))
        : el("p", { class: "hint", text: "No summaries for this segment yet." }),
      el("h3", { text: `Messages (last ${data.messages.length} of ${data.segment.messages})` }),
      table([["time"], ["role"], ["type"], ["text"]],
        data.messages.map((m) => [[fmtTime(m.created_at)], [m.role], [m.type], [m.text + (m.truncated ? " …" : ""), "text"]])));
  } catch (error) { showError(container, error); }
}

async function search(text) {
  const container = document.getElementById("search-results");
  try {
    const { hits } = await api(`/api/search?${chatQuery(selectedChat("memory-chat"))}&q=${encodeURIComponent(text)}`);
    container.replaceChildren(el("h2", { text: `Search results (${hits.length})` }),
      table([["score", "num"], ["distance", "num"], ["full-text rank", "num"], ["segment", "num"], ["time"], ["role"], ["text"]],
        hits.map((h) => [[fmtNum(h.score, 4), "num"], [fmtNum(h.distance, 3), "num"], [h.fts_rank === null ? "–" : `#${h.fts_rank}`, "num"],
          [String(h.segment_number ?? h.segment_id), "num"], [fmtTime(h.created_at)], [h.role], [h.text + (h.truncated ? " …" : ""), "text"]])));
  } catch (error) { showError(container, error); }
}

// ---- settings, status, tabs -----------------------------------------------------------------------------

async function loadSettings() {
  const container = document.getElementById("settings");
  try {
    const { settings, note } = await api("/api/settings");
    const shown = table([["field"], ["value"], ["source"]],
      settings.map((row) => [[row.field], [row.shown, "text"], [row.source, row.command ? "overridden" : ""]]));
    container.replaceChildren(...(note ? [el("p", { class: "hint", text: note })] : []), shown);
  } catch (error) { showError(container, error); }
}

async function refreshStatus() {
  const badge = document.getElementById("engine-status");
  try {
    const status = await api("/api/status");
    badge.textContent = status.engine_connected ? "engine connected"
      : `engine offline — ${status.buffered} message(s) buffered`;
    badge.className = `status ${status.engine_connected ? "up" : "down"}`;
    if (!status.engine_connected) state.away = true;
    else if (state.away || document.querySelector("#messages .history-missing")) catchUp();
  } catch (error) { badge.textContent = "gateway unreachable"; badge.className = "status down"; state.away = true; }
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
  openEvents(await loadHistory());
  refreshStatus();
  setInterval(refreshStatus, 5000);
  document.body.dataset.ready = "true";
}

document.addEventListener("DOMContentLoaded", main);
