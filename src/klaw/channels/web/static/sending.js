// klaw web page: sending a message (decision 458: above bubbles.js). Its bubble says "sending…", then the
// time, or that the engine is offline and it is queued, or why it was not sent. A queued one asks the
// header's status to be read again now through the event `klaw:queued` (app.js listens), so this module
// needs nothing above it.
import { api, fmtTime, state } from "./core.js";
import { addBubble, answered } from "./bubbles.js";

export async function send(text) {
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
      document.dispatchEvent(new Event("klaw:queued"));  // the header counts it now, not at the next 5-second refresh
    }
  } catch (error) {
    bubble.classList.add("error");
    bubble.querySelector(".meta").textContent = `not sent: ${error.message}`;
  } finally {
    state.sending.delete(posted);
  }
}
