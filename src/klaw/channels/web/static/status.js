// klaw web page: the header's engine status, read every 5 seconds (and when a message is queued); klaw
// reached again sends the messages typed while it could not be (sending.js), and the engine back after it
// was gone has the page catch up on its history (decision 458: above history.js and sending.js).
import { api, state } from "./core.js";
import { catchUp } from "./history.js";
import { adoptQuiet, sendUnsent } from "./sending.js";

export async function refreshStatus() {
  const badge = document.getElementById("engine-status");
  await adoptQuiet();  // this tab is alive (klaw there or not); a closed tab's unsent messages are taken (473)
  let status;
  try {
    status = await api("/api/status");
  } catch (error) {
    badge.textContent = "klaw not reachable";
    badge.className = "status down";
    state.away = true;
    return;
  }
  badge.textContent = status.engine_connected ? "engine connected"
    : `engine offline — ${status.buffered} message(s) buffered`;
  badge.className = `status ${status.engine_connected ? "up" : "down"}`;
  if (state.outbox.length) await sendUnsent();  // before the history is read: they get their ids first
  if (!status.engine_connected) state.away = true;
  else if (state.away || document.querySelector("#messages .history-missing")) catchUp();
}
