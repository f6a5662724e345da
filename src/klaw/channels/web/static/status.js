// klaw web page: the header's engine status, read every 5 seconds (and when a message is queued); the
// engine back after it was gone has the page catch up on its history (decision 458: above history.js).
import { api, state } from "./core.js";
import { catchUp } from "./history.js";

export async function refreshStatus() {
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
