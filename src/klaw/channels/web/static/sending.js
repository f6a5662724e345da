// klaw web page: sending a message (decision 458: above bubbles.js). Its bubble says "sending…", then the
// time, or that the engine is offline and it is queued, or why it was not sent. A queued one asks the
// header's status to be read again now through the event `klaw:queued` (app.js listens), so this module
// needs nothing above it.
//
// A message typed while klaw itself cannot be reached (`klaw serve` stopped, the gateway down) is kept in
// the page's outbox, its bubble saying so, and sent, in the order typed, when the page next reaches klaw
// (`sendUnsent`, which status.js calls): nothing typed is lost (decision 464). Before, its bubble said the
// browser's "not sent: Failed to fetch", the box was emptied and nothing was ever sent.
import { api, fmtTime, state } from "./core.js";
import { addBubble, answered } from "./bubbles.js";

export const UNSENT = "not sent yet: klaw is not running — it will be sent when it is back";

export async function send(text) {
  const bubble = addBubble("user", text, "sending…");
  if (state.outbox.length) keep(text, bubble);  // behind the ones still waiting, so they keep their order
  else if (!(await post(text, bubble))) keep(text, bubble);
}

function keep(text, bubble) {
  bubble.classList.add("unsent");
  bubble.querySelector(".meta").textContent = UNSENT;
  state.outbox.push({ text, bubble });
}

// The outbox sent, oldest first; one klaw still does not take stays first, with the others behind it.
let flushing = false;
export async function sendUnsent() {
  if (flushing) return;
  flushing = true;
  try {
    while (state.outbox.length) {
      const { text, bubble } = state.outbox[0];
      bubble.classList.remove("unsent");
      bubble.querySelector(".meta").textContent = "sending…";
      if (!(await post(text, bubble))) {
        bubble.classList.add("unsent");
        bubble.querySelector(".meta").textContent = UNSENT;
        break;
      }
      state.outbox.shift();
    }
  } finally {
    flushing = false;
  }
}

// One POST of a message shown in `bubble`: false when klaw could not be reached (the message is to be kept),
// true when it was taken, queued, or refused for a reason of its own (said in the bubble).
async function post(text, bubble) {
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
      document.dispatchEvent(new Event("klaw:queued"));  // the header counts it now, not at the next 5-second refresh
    }
  } catch (error) {
    if (error.name === "Unreachable") {
      state.away = true;
      return false;
    }
    bubble.classList.add("error");
    bubble.querySelector(".meta").textContent = `not sent: ${error.message}`;
  } finally {
    state.sending.delete(posted);
  }
  return true;
}
