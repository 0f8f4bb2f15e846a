import type { PrStatus } from "../api/client";

const WORD: Record<PrStatus, string> = { open: "open", merged: "merged", closed: "closed" };

/** "PR #12 open" in words (null when the session has no pull request). */
export function prLabel(
  number: number | null | undefined,
  status: PrStatus | null | undefined,
): string | null {
  if (number === null || number === undefined) return null;
  return status ? `PR #${number} ${WORD[status]}` : `PR #${number}`;
}

/** The session's pull request: its number and state (open / merged / closed), as in the reference. */
export function PrBadge({ number, status }: { number: number | null; status: PrStatus | null }) {
  const label = prLabel(number, status);
  if (!label) return null;
  return (
    <span
      className={`badge pr-badge pr-${status ?? "unknown"}`}
      title={label}
      data-pr-status={status ?? undefined}
    >
      PR #{number}
      {status && <span className="pr-state"> {WORD[status]}</span>}
    </span>
  );
}
