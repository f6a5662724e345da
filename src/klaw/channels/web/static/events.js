// klaw web page: the chat's live events (reply pieces, replies, notices, errors), streamed once per browser
// and shared by its tabs, shown in the chat (decision 458: above history.js and approvals.js, whose helpers
// it uses when events arrive); app.js calls `openEvents` once the history is shown.
import { el, state } from "./core.js";
import { addBubble, fillReply, markAnswered, showTools, stamp } from "./bubbles.js";
import { addApprovalButtons, closeQuestions } from "./approvals.js";
import { catchUpAfter, loadHistory } from "./history.js";

function replyBubble(replyTo) {
  let bubble = replyTo ? state.bubbles.get(replyTo) : undefined;
  if (!bubble) {
    bubble = addBubble("assistant streaming", "");
    if (replyTo) state.bubbles.set(replyTo, bubble);
  }
  return bubble;
}

// A streamed reply's text goes in blocks of about STREAM_BLOCK characters, a new one begun once the last is
// that long (after the piece's last line break, if it has one, so no line is cut): each piece then lays out
// its block alone. `textContent +=` on one body copied and laid out the whole text so far at every piece, so
// a long reply cost the square of its length (600 KB in 400 pieces: 122 s in Chromium, 0.6 s in blocks;
// decision 452). A full block whose last line is ended (the last piece ended with a line break, as a model
// writing line by line does) leaves the whole piece to a new block: the cut at the piece's last line break
// gave the full block every such piece, so one block took the whole reply (adversary26). Each block's
// length is kept (`blockLengths`), not read: `textContent.length` copies the block's text (decision 466).
// The finished reply replaces the blocks (fillReply).
const STREAM_BLOCK = 8192;
const blockLengths = new WeakMap(); // block -> { chars, ended: its text ends with a line break }
export function appendPiece(body, text) {
  let block = body.lastElementChild;
  let kept = block ? blockLengths.get(block) : undefined;
  if (kept && kept.chars >= STREAM_BLOCK) {
    const cut = kept.ended ? 0 : text.lastIndexOf("\n") + 1;
    if (cut) {
      block.append(text.slice(0, cut));
      kept.chars += cut;
      kept.ended = true;
      text = text.slice(cut);
    }
    kept = undefined;
  }
  if (!text) return;
  if (!kept) {
    body.append(block = el("div", { class: "piece" }));
    blockLengths.set(block, kept = { chars: 0, ended: false });
  }
  block.append(text);
  kept.chars += text.length;
  kept.ended = text.endsWith("\n");
}

function onEvent(kind, event) {
  const data = JSON.parse(event.data);
  if (kind === "delta") {
    const bubble = replyBubble(data.reply_to);
    appendPiece(bubble.querySelector(".body"), data.text);
  } else if (data.approval && state.shown.has(`approval:${data.approval}`)) {
    // The history load showed this question already (it was asked while the page loaded).
  } else if (data.id && state.shown.has(data.id)) {
    // Already on the page (the history held it, or the engine sent it again): drop its streamed copy.
    if (data.reply_to && state.bubbles.has(data.reply_to)) state.bubbles.get(data.reply_to).remove();
    state.bubbles.delete(data.reply_to);
  } else {
    if (data.id) state.shown.add(data.id);
    const bubble = replyBubble(data.reply_to);
    if (data.id) bubble.dataset.id = data.id;  // the history, read again later (catchUp), finds it by this
    bubble.className = `msg ${kind === "reply" ? "assistant" : kind}`;
    fillReply(bubble, data);
    showTools(bubble, data.tools_line);
    if (data.approval) {
      addApprovalButtons(bubble, data.approval);
      state.shown.add(`approval:${data.approval}`);
    }
    if (kind === "reply") closeQuestions();
    stamp(bubble, new Date().toISOString());
    state.bubbles.delete(data.reply_to);
    // A turn answers every message of a burst the engine took as one (its debounce): `answers` names them
    // all, `reply_to` only the last; marking that one alone left the others looking unanswered (decision 505).
    for (const id of new Set([...(Array.isArray(data.answers) ? data.answers : []), data.reply_to])) if (id) markAnswered(id);
    if (data.forgotten) reloadAfterForget(bubble);
    else catchUpAfter(data.reply_to);  // the engine is there: what the page missed meanwhile (if so) is shown now
  }
  document.getElementById("messages").scrollTop = 1e9;
}

// Something of this chat was forgotten (/forget, klaw memory forget): the page shows the chat as it is
// now, without what was erased, and the notice saying so under it.
async function reloadAfterForget(notice) {
  notice.remove();
  document.getElementById("messages").replaceChildren();
  state.bubbles.clear();
  state.shown.clear();
  await loadHistory();
  document.getElementById("messages").append(notice);
  document.getElementById("messages").scrollTop = 1e9;
}

// One event stream per browser, shared by its tabs (decision 368): a browser keeps at most 6 connections
// to a host, and a stream per tab held them all at 6 tabs, every other request of every tab waiting for
// good. The tab holding the Web Lock streams and passes each event to the others over a BroadcastChannel;
// when it closes, the next tab takes the lock and streams from the last event it got, so none is lost.
// `cursor`: the event number read with the history, so what came while it loaded is shown too, and
// nothing older twice. Without Web Locks (a page served over plain HTTP to another machine) each tab streams.
const EVENT_KINDS = ["delta", "reply", "notice", "error"];
const EVENTS_LOCK = "klaw-events";
export function openEvents(cursor) {
  state.lastEvent = state.skipTo = cursor == null ? null : Number(cursor);
  if (!navigator.locks || typeof BroadcastChannel !== "function") { streamEvents(null); return; }
  const channel = new BroadcastChannel(EVENTS_LOCK);
  channel.addEventListener("message", (message) => deliver(message.data.kind, message.data.id, message.data.data));
  navigator.locks.request(EVENTS_LOCK, () => new Promise((release) => streamEvents(channel, release)));
}

// The stream itself, its events shown here and passed to the other tabs; `release` (the lock's) once it
// has ended for good (signed out), so another tab may try. It starts after the last event this tab showed.
function streamEvents(channel, release) {
  const since = state.lastEvent;
  state.skipTo = null;  // the server sends only what follows `since` (or, restarted, numbers from 1 again)
  const source = new EventSource(since == null ? "/api/events" : `/api/events?since=${encodeURIComponent(since)}`);
  for (const kind of EVENT_KINDS) {
    source.addEventListener(kind, (event) => {
      // EventSource's own connection error (klaw stopped, the network gone) is an `error` event too, with no
      // data and no id: only the server's `error` events (messages) are shown (decision 512).
      if (!(event instanceof MessageEvent)) return;
      const id = Number(event.lastEventId);
      if (channel) channel.postMessage({ kind, id, data: event.data });
      deliver(kind, id, event.data);
    });
  }
  source.addEventListener("error", () => { if (source.readyState === EventSource.CLOSED && release) release(); });
}

// An event, streamed here or passed on by the streaming tab. Until one newer than the history comes, the
// older ones passed on are already in it (`skipTo`); after that every one is new, even with a lower number
// (a restarted gateway numbers them from 1 again).
function deliver(kind, id, data) {
  if (state.skipTo != null) {
    if (id <= state.skipTo) return;
    state.skipTo = null;
  }
  if (Number.isFinite(id)) state.lastEvent = id;  // never NaN: it is the next stream's `since`
  onEvent(kind, { data });
}
