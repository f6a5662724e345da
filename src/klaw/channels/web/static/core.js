// klaw web page, the bottom of its modules (decision 458): the page's state, and the helpers every view
// uses: `el` builds elements (text only ever set with textContent), `api` calls the gateway with the
// session's CSRF token, tables and times formatted alike. It imports nothing of the page.

// bubbles: reply_to → the reply bubble being written; answered: ids whose reply came before the POST said
// which id the message got (a fast reply), so `send` can still mark its message answered (class `answered`).
// lastEvent: the number of the last event shown (or the history's cursor); skipTo: events.js. sending: the
// sends whose POST has not answered (their bubbles have no id yet); away: the engine was seen gone since the
// page last read the history (catchUp). outbox: the messages typed while klaw could not be reached, in order,
// each with its bubble, sent when it answers again (sending.js, decision 464).
export const state = { csrf: "", chat: { channel: "web", chat_id: "main" }, bubbles: new Map(), answered: new Set(), shown: new Set(), chats: [], lastEvent: null, skipTo: null, sending: new Set(), away: false, outbox: [] };

// klaw could not be reached at all: the browser's own words for it ("Failed to fetch", "NetworkError when
// attempting to fetch resource") name no cause a person knows, and it is not an answer: what was asked may
// be asked again once klaw is back. A proxy in front of a stopped klaw answers 502-504 without klaw's words.
export class Unreachable extends Error {
  constructor() { super("klaw is not running (or cannot be reached)"); this.name = "Unreachable"; }
}

// The session ended (expired, signed out elsewhere): the page goes to the sign-in form; what was being sent is
// kept (sending.js), not refused.
export class SignedOut extends Error {
  constructor() { super("signed out"); this.name = "SignedOut"; }
}

export function el(tag, attrs = {}, ...children) {
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

export async function api(path, options = {}) {
  const init = { credentials: "same-origin", headers: {}, ...options };
  if (init.body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.headers["X-CSRF-Token"] = state.csrf;
    init.body = JSON.stringify(init.body);
  }
  let response;
  try { response = await fetch(path, init); } catch { throw new Unreachable(); }
  if (response.status === 401) { window.location.assign("/login"); throw new SignedOut(); }
  const data = await response.json().catch(() => ({}));
  if (!response.ok && !data.detail && [502, 503, 504].includes(response.status)) throw new Unreachable();
  if (!response.ok) throw new Error(data.detail || `HTTP ${response.status}`);
  return data;
}

export function fmtTime(iso) { return iso ? new Date(iso).toLocaleString() : ""; }
export function fmtNum(value, digits) { return value === null || value === undefined ? "–" : Number(value).toFixed(digits); }
export function table(headers, rows) {
  const head = el("tr", {}, ...headers.map(([label, cls]) => el("th", { class: cls || "", text: label })));
  // Each cell carries its column's name: on a phone a row is shown as a card of "name: value" lines (style.css).
  const body = rows.map((cells) => el("tr", {}, ...cells.map(([value, cls], i) =>
    el("td", { class: cls || "", "data-label": headers[i] ? headers[i][0] : "" }, value instanceof Node ? value : String(value ?? "")))));
  return el("div", { class: "table-wrap" }, el("table", {}, el("thead", {}, head), el("tbody", {}, ...body)));
}
export function showError(container, error) { container.replaceChildren(el("p", { class: "error", text: error.message })); }
