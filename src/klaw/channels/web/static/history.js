// klaw web page: the chat's history — shown when the page opens, and read again to catch up on what the
// page missed (decision 458: above approvals.js, as waiting questions come back with their buttons).
import { api, el, fmtTime, state } from "./core.js";
import { addBubble, answered, fillReply, showTools } from "./bubbles.js";
import { addApprovalButtons } from "./approvals.js";

// The chat so far, so a reload or a new sign-in does not open on an empty page. Older messages than
// these are in the Memory tab; a line marks where `/new` started a new conversation. Without the engine
// the history cannot be read: the line saying so is marked, and the history shown when the engine is back.
export async function loadHistory() {
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
    const shown = message.id ? document.querySelector(`#messages .msg${message.role === "user" ? ".user" : ":not(.user)"}[data-id="${CSS.escape(message.id)}"]`) || fromThisPage(message) : null;
    if (shown) {
      if (message.answered && !shown.classList.contains("answered")) answered(shown);  // its reply was missed
      found(shown);
      continue;
    }
    if (divided) place(el("div", { class: "divider", text: "new conversation" }));
    const bubble = addBubble(message.role === "user" ? "user" : "assistant", message.role === "user" ? message.text : "", fmtTime(message.created_at));
    if (message.id) bubble.dataset.id = message.id;
    if (message.role === "user") {
      bubble.dataset.at = message.created_at;  // answered later (its reply comes live), it keeps this time
      if (message.answered) bubble.classList.add("answered");  // as a live reply's `answers` marked it (decision 505)
    }
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

// A message this page sent whose POST has not answered (its answer lost, or still on its way, or waiting in the
// outbox to be sent again): found by the page's own id, which klaw's id for it ends with (`web-<chat>-<client_id>`,
// decision 479), and given klaw's id. Without it the history showed it a second time (CI114: a dropped answer).
function fromThisPage(message) {
  if (message.role !== "user") return null;
  for (const bubble of document.querySelectorAll("#messages .msg.user[data-client-id]:not([data-id])")) {
    if (message.id === `web-${state.chat.chat_id}-${bubble.dataset.clientId}`) {
      bubble.dataset.id = message.id;
      bubble.dataset.at ||= message.created_at;  // marked answered now, it shows this time, not nothing
      return bubble;
    }
  }
  return null;
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
export async function catchUp() {
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
export async function catchUpAfter(replyTo) {
  if (document.querySelector("#messages .history-missing") || state.away) { catchUp(); return; }
  if (!replyTo) return;
  await Promise.allSettled([...state.sending]);  // this page's own message may not have its id yet
  if (!document.querySelector(`#messages .msg.user[data-id="${CSS.escape(replyTo)}"]`)) catchUp();
}
