// The status chip (reference §3.13, on the server's lifecycle states) and the hibernation countdown.
import type { LifecycleState, SandboxStatus } from "../api/client";

export type ChipLabel =
  "Provisioning" | "Active" | "Hibernating" | "Paused" | "Restoring" | "Archived" | "Failed" | "No sandbox";

interface Chip {
  label: ChipLabel;
  /** Shown on hover and to screen readers (the lifecycle error of a failed sandbox). */
  detail: string | null;
}

/** States the server moves out of by itself: the chip polls faster while in one. */
const TRANSITIONAL: ReadonlySet<LifecycleState> = new Set(["provisioning", "hibernating", "restoring"]);

export function deriveChip(archived: boolean, status: SandboxStatus, resuming = false): Chip {
  const state = status.lifecycle.state;
  const chip = (label: ChipLabel, detail: string | null = null): Chip => ({ label, detail });
  if (archived || state === "archived") return chip("Archived");
  if (state === "provisioning") return chip("Provisioning");
  if (resuming || state === "restoring") return chip("Restoring");
  if (state === "hibernating") return chip("Hibernating");
  if (state === "failed") return chip("Failed", status.lifecycle.error ?? "The sandbox failed");
  if (state === "hibernated" && status.hasSnapshot) return chip("Paused");
  if (status.status === "active" && (state === null || state === "active")) return chip("Active");
  if (status.hasSnapshot) return chip("Paused");
  return chip("No sandbox");
}

/** An action of this client the server has not shown yet (its effect is said at once). */
export type Pending = "pause" | "unarchive" | null;

/**
 * The chip while an action settles: a Pause in flight already says Hibernating; an unarchived
 * session provisions its sandbox from the archive bundle, which the user sees as Restoring.
 */
export function withPending(chip: Chip, pending: Pending): Chip {
  if (pending === "pause" && chip.label === "Active") return { label: "Hibernating", detail: null };
  if (pending === "unarchive" && (chip.label === "Provisioning" || chip.label === "Archived"))
    return { label: "Restoring", detail: null };
  return chip;
}

/**
 * A lifecycle error in words: the first line, without exception class names, the provisioning
 * step named as what it does ("Provisioning failed: SandboxError: git clone …" → "The sandbox
 * could not be set up: git clone …").
 */
export function failureInWords(error: string | null | undefined): string {
  const line = (error ?? "").split("\n").find((l) => l.trim()) ?? "";
  const words = line
    .replace(/\b(?:[A-Z]\w*\.)*(?:[A-Z]\w*)?(?:Error|Exception|Failure|Timeout)\b:?\s*/g, "")
    .replace(/^Provisioning failed:?\s*/i, "The sandbox could not be set up: ")
    .replace(/^Restore failed:?\s*/i, "The sandbox could not be restored: ")
    .replace(/[:\s]+$/, "")
    .trim();
  if (!words) return "The sandbox failed.";
  return /[.!?]$/.test(words) ? words : `${words}.`;
}

/** The sidebar's badge, from the list projection's lifecycle state alone. */
export function stateBadge(state: LifecycleState | null | undefined, archived: boolean): ChipLabel {
  if (archived) return "Archived";
  switch (state) {
    case "provisioning":
      return "Provisioning";
    case "active":
      return "Active";
    case "hibernating":
      return "Hibernating";
    case "hibernated":
      return "Paused";
    case "restoring":
      return "Restoring";
    case "archived":
      return "Archived";
    case "failed":
      return "Failed";
    default:
      return "No sandbox";
  }
}

/**
 * Milliseconds until the sandbox hibernates, on the server's clock: `hibernateAfter − serverTime`,
 * less the time elapsed since the status was received. Null when nothing is scheduled.
 */
export function msUntilHibernation(status: SandboxStatus, receivedAt: number, now: number): number | null {
  const { hibernateAfter, serverTime, state } = status.lifecycle;
  if (hibernateAfter === null || state !== "active") return null;
  return Math.max(0, hibernateAfter - serverTime - (now - receivedAt));
}

export function formatCountdown(ms: number): string {
  const total = Math.ceil(ms / 1000);
  const hours = Math.floor(total / 3600);
  const minutes = Math.floor((total % 3600) / 60);
  const seconds = String(total % 60).padStart(2, "0");
  return hours > 0 ? `${hours}:${String(minutes).padStart(2, "0")}:${seconds}` : `${minutes}:${seconds}`;
}

export const POLL_MS = 15_000;
export const FAST_POLL_MS = 2_000;

/**
 * When to ask again: every 15 s; every 2 s while the server is between states; and right after
 * an active sandbox's hibernation time, so the chip turns without waiting for the next poll.
 */
export function nextPollDelay(status: SandboxStatus): number {
  const { state, hibernateAfter, serverTime } = status.lifecycle;
  if (state && TRANSITIONAL.has(state)) return FAST_POLL_MS;
  if (state === "active" && hibernateAfter !== null) {
    return Math.min(POLL_MS, Math.max(1_000, hibernateAfter - serverTime + 1_000));
  }
  return POLL_MS;
}
