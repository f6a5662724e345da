// klaw web page: the Inspector tab, what went into each recent turn: its context layers drawn as an SVG bar
// against the token budget, the tools and past conversations they held, what auto-RAG recalled with its
// scores (decision 458: above chats.js).
import { api, el, fmtNum, fmtTime, showError, table } from "./core.js";
import { chatQuery, selectedChat } from "./chats.js";

const SVG = "http://www.w3.org/2000/svg";
// Each context layer keeps its colour in every turn (style.css .layer-N); an unknown one is grey.
const LAYERS = ["system_prompt", "core_memory", "summary", "past_conversations", "auto_rag", "sliding_window", "tools", "pending", "skills"];
function layerClass(name) { const index = LAYERS.indexOf(name); return `layer-${index < 0 ? LAYERS.length : index}`; }

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  node.append(...children);
  return node;
}

// The turn's context at a glance: one bar for the whole token budget, a coloured block per layer in
// the order the prompt holds them, the rest of the budget left pale (or a red edge when over it).
function contextBar(turn) {
  const scale = Math.max(turn.budget, turn.total_tokens, 1);
  const bar = svg("svg", { class: "context-bar", viewBox: "0 0 1000 36", preserveAspectRatio: "none", role: "img",
    "aria-label": `${turn.total_tokens} of ${turn.budget} tokens used` });
  bar.append(svg("rect", { class: "budget", x: 0, y: 0, width: 1000 * turn.budget / scale, height: 36 }));
  let x = 0;
  for (const layer of turn.layers) {
    const width = 1000 * layer.tokens / scale;
    if (width <= 0) continue;
    bar.append(svg("rect", { class: `layer ${layerClass(layer.name)}`, "data-layer": layer.name, x, y: 4, width, height: 28 },
      svg("title", {}, `${layer.name}: ${layer.tokens} tokens, ${layer.items} item(s)`)));
    x += width;
  }
  if (turn.total_tokens > turn.budget) bar.append(svg("rect", { class: "over", x: 1000 * turn.budget / scale - 2, y: 0, width: 4, height: 36 }));
  return bar;
}

function scoreBar(score, best) {
  const meter = el("span", { class: "score-bar" });
  const fill = el("span", { class: "score-fill" });
  fill.style.width = `${best > 0 && score !== null ? Math.round(100 * score / best) : 0}%`;
  meter.append(fill);
  return el("span", { class: "score" }, meter, fmtNum(score, 4));
}

function renderTurn(turn) {
  const box = el("article", { class: "turn" });
  const percent = turn.budget ? Math.round(100 * turn.total_tokens / turn.budget) : 0;
  box.append(el("h3", { text: `${fmtTime(turn.at)} · ${turn.model} · ${turn.total_tokens} of ${turn.budget} tokens (${percent}%)` }));
  box.append(contextBar(turn));
  box.append(table([["", "key"], ["layer"], ["tokens", "num"], ["share", "num"], ["items", "num"]],
    turn.layers.map((layer) => [[el("span", { class: `swatch ${layerClass(layer.name)}` }), "key"], [layer.name],
      [String(layer.tokens), "num"], [`${turn.budget ? Math.round(100 * layer.tokens / turn.budget) : 0}%`, "num"], [String(layer.items), "num"]])));
  // The tools layer tool by tool: every schema is sent with every call, so this is where tokens go unseen.
  const tools = turn.layers.find((layer) => layer.name === "tools" && (layer.parts || []).length);
  if (tools) {
    const details = el("details", { class: "tool-parts" });
    details.append(el("summary", { text: `Tools offered: ${tools.items}, ${tools.tokens} tokens` }));
    details.append(table([["tool"], ["tokens", "num"]],
      [...tools.parts].sort((a, b) => b.tokens - a.tokens).map((part) => [[part.name], [String(part.tokens), "num"]])));
    box.append(details);
  }
  // What past conversations were recalled, by id and first words (decision 445).
  const past = turn.layers.find((layer) => layer.name === "past_conversations" && (layer.parts || []).length);
  if (past) {
    const details = el("details", { class: "tool-parts" });
    details.append(el("summary", { text: `Past conversations recalled: ${past.tokens} tokens` }));
    details.append(table([["segment, exchange or message"], ["tokens", "num"]],
      past.parts.map((part) => [[part.name], [String(part.tokens), "num"]])));
    box.append(details);
  }
  if (turn.recalled.length) {
    const best = Math.max(...turn.recalled.map((hit) => hit.score || 0));
    box.append(el("h4", { text: "Auto-RAG recalled (best first)" }));
    box.append(table([["#", "num"], ["score"], ["distance", "num"], ["full-text rank", "num"], ["role"], ["text"]],
      turn.recalled.map((hit, index) => [[String(index + 1), "num"], [scoreBar(hit.score, best)], [fmtNum(hit.distance, 3), "num"],
        [hit.fts_rank === null ? "–" : `#${hit.fts_rank}`, "num"], [hit.role], [hit.text + (hit.truncated ? " …" : ""), "text"]])));
  } else {
    box.append(el("p", { class: "hint", text: "No auto-RAG hits for this turn." }));
  }
  for (const warning of turn.warnings) box.append(el("p", { class: "error", text: warning }));
  return box;
}

export async function loadTurns() {
  const container = document.getElementById("turns");
  try {
    const { turns } = await api(`/api/turns?${chatQuery(selectedChat("inspector-chat"))}`);
    container.replaceChildren(...(turns.length ? turns.map(renderTurn)
      : [el("p", { class: "hint", text: "No turn of this chat since the engine started." })]));
  } catch (error) { showError(container, error); }
}
