// klaw web page: the chats the Inspector and Memory tabs choose between (decision 458: above core.js).
import { api, el, state } from "./core.js";

export function selectedChat(selectId) {
  const value = document.getElementById(selectId).value;
  return state.chats[Number(value)] || state.chat;
}

export function chatQuery(chat) { return `channel=${encodeURIComponent(chat.channel)}&chat_id=${encodeURIComponent(chat.chat_id)}`; }

export async function loadChats() {
  try {
    state.chats = (await api("/api/chats")).chats;
  } catch (error) {
    state.chats = [state.chat];
  }
  for (const select of document.querySelectorAll(".chat-select")) {
    const previous = select.value;
    select.replaceChildren(...state.chats.map((chat, index) => el("option", { value: String(index), text: `${chat.channel}:${chat.chat_id}` })));
    if (previous && Number(previous) < state.chats.length) select.value = previous;
  }
}
