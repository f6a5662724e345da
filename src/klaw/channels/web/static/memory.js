// klaw web page: the Memory tab, a chat's segments, one segment's exchanges, summaries and messages, and
// search in the chat's memory (decision 458: above chats.js).
import { api, el, fmtNum, fmtTime, showError, table } from "./core.js";
import { chatQuery, selectedChat } from "./chats.js";

export async function loadSegments() {
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

export async function search(text) {
  const container = document.getElementById("search-results");
  try {
    const { hits } = await api(`/api/search?${chatQuery(selectedChat("memory-chat"))}&q=${encodeURIComponent(text)}`);
    container.replaceChildren(el("h2", { text: `Search results (${hits.length})` }),
      table([["score", "num"], ["distance", "num"], ["full-text rank", "num"], ["segment", "num"], ["time"], ["role"], ["text"]],
        hits.map((h) => [[fmtNum(h.score, 4), "num"], [fmtNum(h.distance, 3), "num"], [h.fts_rank === null ? "–" : `#${h.fts_rank}`, "num"],
          [String(h.segment_number ?? h.segment_id), "num"], [fmtTime(h.created_at)], [h.role], [h.text + (h.truncated ? " …" : ""), "text"]])));
  } catch (error) { showError(container, error); }
}
