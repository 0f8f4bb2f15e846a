// Where a chat's live run was last rendered: its run, the last safe seq and the message at that
// seq, kept per chat in localStorage so a reload continues from there (no event folded twice).
import type { AgentMessage } from "./stream";

export interface Checkpoint {
  runId: string;
  seq: number;
  message: AgentMessage | null;
}

const key = (chatId: string) => `openagents.run.${chatId}`;

export function loadCheckpoint(chatId: string): Checkpoint | null {
  try {
    const raw = localStorage.getItem(key(chatId));
    if (!raw) return null;
    const value = JSON.parse(raw) as Checkpoint;
    return typeof value.runId === "string" && typeof value.seq === "number" ? value : null;
  } catch {
    return null;
  }
}

export function saveCheckpoint(chatId: string, checkpoint: Checkpoint): void {
  try {
    localStorage.setItem(key(chatId), JSON.stringify(checkpoint));
  } catch {
    // storage full or disabled: a reload then replays the run from its first event
  }
}

export function clearCheckpoint(chatId: string): void {
  try {
    localStorage.removeItem(key(chatId));
  } catch {
    // nothing to do
  }
}
