// klaw web page: whether another tab of this browser is still alive, so its outbox (sending.js) is taken over
// the moment it is gone and never while it lives (decision 509). It imports nothing of the page.
//
// Each tab holds a Web Lock named for it from the moment its outbox is kept until the page is gone. The browser
// releases a page's locks however it ends (closed, killed, crashed, discarded), so a tab whose outbox entry names
// a lock nobody holds is gone, even one that never ran its `pagehide`. Before, a tab's liveness was its last word
// (the time it last said it was alive, or "left" from its pagehide): a tab closed under load or crashed said
// nothing, and the next tab waited QUIET_MS (90 s) before sending what it held. Quiet for QUIET_MS still means
// gone: a tab the browser froze in the background keeps its lock but runs nothing, so another tab sends what it
// held (it drops those bubbles when it wakes, sending.js), as before. Where there are no Web Locks (a page served
// over plain HTTP to another machine: they need a secure context), and for an entry written by a page from before
// this (no `lock` in it), the last word is the only rule: quiet for QUIET_MS, or left.

export const TAB = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
// A tab that has not said it is alive for this long is gone: it says so every 5 s, or once a minute when the
// browser throttles a tab long in the background; a closed one says it is gone at once (pagehide).
const QUIET_MS = 90000;
const LOCK = `klaw-tab:${TAB}`;
let locked = false;  // this tab holds LOCK: its outbox entry names it

// This tab's lock taken (the promise settles once it is held, or at once without Web Locks), held for the
// page's life. Asked again when a page comes back from the back-forward cache: a browser may have let it go.
export async function holdTabLock() {
  if (!navigator.locks) return;
  try {
    const { held } = await navigator.locks.query();
    if (held.some((lock) => lock.name === LOCK)) return;
  } catch { return; }
  locked = false;
  await new Promise((granted) => {
    navigator.locks.request(LOCK, () => {
      locked = true;
      granted();
      return new Promise(() => {});  // never ends: the browser releases it when the page goes
    }).catch(() => granted());  // refused (a sandboxed frame): the last word is the rule for this tab
  });
}

// What this tab's outbox entry says of it besides its messages: when it last said it is alive (0: it left),
// and the lock whose release says it is gone.
export function aliveMark(alive) {
  return locked ? { at: alive ? Date.now() : 0, lock: LOCK } : { at: alive ? Date.now() : 0 };
}

// The names of the Web Locks held in this browser for this origin now (null without Web Locks).
export async function heldLocks() {
  if (!navigator.locks) return null;
  try {
    const { held } = await navigator.locks.query();
    return new Set(held.map((lock) => lock.name));
  } catch { return null; }
}

// Whether the tab that wrote `entry` is alive: it said so less than QUIET_MS ago (not "left": 0), and the lock
// it names, if it names one and the locks can be read, is held.
export function stillAlive(entry, held) {
  if (!(Date.now() - Number(entry.at) < QUIET_MS)) return false;
  return typeof entry.lock !== "string" || !held || held.has(entry.lock);
}
