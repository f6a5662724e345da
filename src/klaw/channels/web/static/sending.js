// klaw web page: sending a message (decision 458: above bubbles.js). Its bubble says "sending…", then the
// time, or that the engine is offline and it is queued, or why it was not sent. A queued one asks the
// header's status to be read again now through the event `klaw:queued` (app.js listens), so this module
// needs nothing above it.
//
// A message typed while klaw itself cannot be reached (`klaw serve` stopped, the gateway down) is kept in
// the page's outbox, its bubble saying so, and sent, in the order typed, when the page next reaches klaw
// (`sendUnsent`, which status.js calls): nothing typed is lost (decision 464). Before, its bubble said the
// browser's "not sent: Failed to fetch", the box was emptied and nothing was ever sent.
//
// The outbox is kept in the browser's localStorage too (decision 473), under the session's `outbox` key (one
// per token) and this tab's own name, with the time the tab last said it is alive (every status check) and the
// Web Lock it holds while it lives (alive.js, decision 509). A page that loads, or checks the status, takes over
// the outboxes of tabs gone (closed, killed or crashed: their locks released; gone to the sign-in form when the
// session expired: each marks its own as left when it goes) and sends them: a tab closed while klaw was away, or
// a session that expired, no longer loses what was typed. An open tab's outbox is never taken (it sends its
// own); Web Locks, where there are, keep two loading tabs from taking the same one.
//
// Each message has the page's own id (`client_id`), kept with it in the outbox (`ids` beside `texts` in
// localStorage): a POST klaw stored whose response was lost (a dropped connection, a proxy's 504, serve
// stopped right after taking it) is sent again with the same id, and klaw stores it once (decision 479).
import { api, fmtTime, state } from "./core.js";
import { addBubble, answered } from "./bubbles.js";
import { aliveMark, heldLocks, holdTabLock, stillAlive, TAB } from "./alive.js";

export const UNSENT = "not sent yet: klaw is not running — it will be sent when it is back";

export async function send(text) {
  const bubble = addBubble("user", text, "sending…");
  const id = newId();
  bubble.dataset.clientId = id;  // the history finds it by this before its POST answers (history.js fromThisPage)
  if (state.outbox.length) keep(text, bubble, id);  // behind the ones still waiting, so they keep their order
  else if (!(await post(text, bubble, id))) keep(text, bubble, id);
}

function keep(text, bubble, id) {
  bubble.classList.add("unsent");
  bubble.querySelector(".meta").textContent = UNSENT;
  state.outbox.push({ text, bubble, id });
  save();
}

// 32 hex digits from the browser's random source (crypto.randomUUID needs https, a LAN address may not have it).
function newId() {
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (byte) => byte.toString(16).padStart(2, "0")).join("");
}

let prefix = null;  // "klaw-outbox:<the session's key>:", once the page knows it
export let stored = false;  // whether the outbox is in localStorage (else leaving the page asks first)

// This tab's outbox written to localStorage (`alive`: false as the tab goes), or its entry removed when empty.
function save(alive = true) {
  if (!prefix) return;
  try {
    if (state.outbox.length) {
      const entry = { ...aliveMark(alive), texts: state.outbox.map((message) => message.text), ids: state.outbox.map((message) => message.id) };
      localStorage.setItem(prefix + TAB, JSON.stringify(entry));
    } else localStorage.removeItem(prefix + TAB);
    stored = true;
  } catch { stored = false; }  // storage refused (full, disabled): the outbox lives in this page only
}

// Whether this tab's outbox is still its own in localStorage (true when storage cannot be read).
function stillOurs() {
  try { return localStorage.getItem(prefix + TAB) !== null; } catch { return true; }
}

// The page knows its session's key: its outbox is kept from now on, and gone tabs' outboxes are taken over.
export async function keepOutbox(key) {
  await holdTabLock();  // before this tab's entry is first written, so the entry names the lock
  prefix = `klaw-outbox:${key}:`;
  window.addEventListener("pagehide", () => save(false));
  window.addEventListener("pageshow", async (event) => { if (event.persisted) { await holdTabLock(); save(); } });
  await adoptQuiet();
}

// This tab says it is alive, and takes over the outboxes of tabs gone, oldest first, behind its own.
export async function adoptQuiet() {
  if (!prefix) return;
  if (state.outbox.length && !stillOurs()) {  // another page took this one's over (it seemed gone): it sends them
    for (const { bubble } of state.outbox.splice(0)) bubble.remove();
    state.away = true;  // the history, read when klaw is back, shows them once sent
  }
  save();
  const take = async () => {
    const held = await heldLocks();  // read inside the outbox lock: no tab takes an entry while another decides
    const found = [];
    try {
      for (let index = 0; index < localStorage.length; index++) {
        const name = localStorage.key(index);
        if (!name || !name.startsWith(prefix) || name === prefix + TAB) continue;
        const entry = JSON.parse(localStorage.getItem(name) || "null");
        if (entry && stillAlive(entry, held)) continue;  // that tab is open: it sends its own
        found.push([name, entry]);
      }
    } catch { return; }
    found.sort((a, b) => Number(a[1]?.at) - Number(b[1]?.at));
    for (const [name, entry] of found) {
      localStorage.removeItem(name);
      const ids = Array.isArray(entry?.ids) ? entry.ids : [];
      (Array.isArray(entry?.texts) ? entry.texts : []).forEach((text, index) => {
        const id = typeof ids[index] === "string" ? ids[index] : newId();  // an entry an older page kept has none
        if (typeof text !== "string") return;
        // klaw took it, and the tab closed before it heard so (its answer lost): the history shows it already
        if (document.querySelector(`#messages .msg.user[data-id="${CSS.escape(`web-${state.chat.chat_id}-${id}`)}"]`)) return;
        const bubble = addBubble("user", text, UNSENT);
        bubble.dataset.clientId = id;
        keep(text, bubble, id);
      });
    }
  };
  if (navigator.locks) await navigator.locks.request("klaw-outbox", take);
  else await take();
}

// The outbox sent, oldest first; one klaw still does not take stays first, with the others behind it.
let flushing = false;
export async function sendUnsent() {
  if (flushing) return;
  flushing = true;
  try {
    while (state.outbox.length) {
      const { text, bubble, id } = state.outbox[0];
      bubble.classList.remove("unsent");
      bubble.querySelector(".meta").textContent = "sending…";
      if (!(await post(text, bubble, id))) {
        bubble.classList.add("unsent");
        bubble.querySelector(".meta").textContent = UNSENT;
        break;
      }
      state.outbox.shift();
      save();
    }
  } finally {
    flushing = false;
  }
}

// One POST of a message shown in `bubble`: false when klaw could not be reached (the message is to be kept),
// true when it was taken, queued, or refused for a reason of its own (said in the bubble). `id` is the
// message's own: sent again, it is the same message to klaw.
async function post(text, bubble, id) {
  const posted = api("/api/messages", { method: "POST", body: { text, client_id: id } });
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
      document.dispatchEvent(new Event("klaw:queued"));  // the header counts it now, not at the next 5-second refresh
    }
  } catch (error) {
    if (error.name === "Unreachable") {
      state.away = true;
      return false;
    }
    if (error.name === "SignedOut") return false;  // kept: sent once the person has signed in again (473)
    bubble.classList.add("error");
    bubble.querySelector(".meta").textContent = `not sent: ${error.message}`;
  } finally {
    state.sending.delete(posted);
  }
  return true;
}
