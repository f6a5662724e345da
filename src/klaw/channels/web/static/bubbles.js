// klaw web page: the chat's messages as bubbles — one added, a finished reply filled in (sanitized HTML or
// text), the tools its turn used, its time, a sent message marked answered (decision 458: above core.js).
import { api, el, fmtTime, state } from "./core.js";

export function addBubble(kind, text, meta) {
  const box = document.getElementById("messages");
  const bubble = el("div", { class: `msg ${kind}` }, el("div", { class: "body", text }));
  if (meta) bubble.append(el("span", { class: "meta", text: meta }));
  box.append(bubble);
  box.scrollTop = box.scrollHeight;
  return bubble;
}

// A finished reply: sanitized HTML from the server when it rendered Markdown, else the plain text;
// a message the agent sent unasked is headed with whose it is: its task, or the chat it was written in.
export function fillReply(bubble, data) {
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

// A message the agent answered shows the time it was sent, as the history shows earlier ones (a queued
// message's note gives way to it); the class is what marks it answered.
export function markAnswered(id) {
  const sent = document.querySelector(`.msg.user[data-id="${CSS.escape(id)}"]`);
  if (sent) answered(sent);
  else state.answered.add(id);  // the POST has not told us this message's id yet
}

export function answered(bubble) {
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
export function showTools(bubble, line) {
  bubble.querySelector(".tools")?.remove();
  if (line) bubble.querySelector(".body").after(el("div", { class: "tools", text: line }));
}

// A finished reply, notice or error gets its time under it, as the history shows earlier ones.
export function stamp(bubble, at) {
  let meta = bubble.querySelector(":scope > .meta");
  if (!meta) bubble.append(meta = el("span", { class: "meta" }));
  meta.textContent = fmtTime(at);
}
