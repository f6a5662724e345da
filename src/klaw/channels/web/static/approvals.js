// klaw web page: questions to approve a held tool (decision 458: above sending.js, whose `send` answers).
import { api, el } from "./core.js";
import { send } from "./sending.js";

// A question to approve a held tool: two buttons that send `/approve ID` or `/deny ID` as if typed. Once
// one is clicked the question says which, and its line of time left to answer goes: before, greyed
// buttons stayed under "no answer in the 4 minutes 57 seconds left means no" (newcomer13). The engine's
// notice below it says what came of the answer.
export function addApprovalButtons(bubble, id) {
  const answer = (command) => () => {
    const box = bubble.querySelector(".approval");
    if (box.dataset.answered) return;
    box.dataset.answered = command;
    for (const line of bubble.querySelectorAll(".body p")) {
      if (line.textContent.includes(`/approve ${id}`)) line.remove();
    }
    box.replaceChildren(el("span", { class: "closed", text: command === "approve" ? "You chose Approve." : "You chose Deny." }));
    send(`/${command} ${id}`);
  };
  bubble.append(el("div", { class: "approval", "data-id": id },
    el("button", { type: "button", class: "approve", text: "Approve", onclick: answer("approve") }),
    el("button", { type: "button", class: "deny", text: "Deny", onclick: answer("deny") })));
}

// A reply ends its turn, so a question of that turn still offered is over (its time ran out, or another
// tab answered it). Which ones is the engine's to say: a reply can be an older one shown late (it arrived
// while the page loaded, after a later question was shown), which must not close that question. Only the
// questions offered when the engine is asked can be closed by its answer: one shown while the answer was
// on its way (a later turn's) is not in it, though it waits (adversary16), and keeps its buttons.
export async function closeQuestions() {
  const unanswered = (offered) => !offered.dataset.answered;
  const offered = [...document.querySelectorAll("#messages .approval")].filter(unanswered);
  if (!offered.length) return;
  let waiting;
  try {
    waiting = new Set((await api("/api/approvals")).approvals.map((question) => question.id));
  } catch (error) { return; }  // unknown: keep the buttons; a late click is answered in words
  for (const question of offered) {
    if (!unanswered(question) || waiting.has(question.dataset.id)) continue;  // answered here, or still waiting
    question.replaceChildren(el("span", { class: "closed", text: "No longer waiting for an answer." }));
  }
}
