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
export function PrBadge({
  number,
  status,
  checks = null,
}: {
  number: number | null;
  status: PrStatus | null;
  /** The checks of its head in words ("2 of 3 checks passed, 1 failed"), when known. */
  checks?: string | null;
}) {
  const label = prLabel(number, status);
  if (!label) return null;
  const titled = checks ? `${label}: ${checks}` : label;
  return (
    <span
      className={`badge pr-badge pr-${status ?? "unknown"}`}
      title={titled}
      data-pr-status={status ?? undefined}
    >
      PR #{number}
      {status && <span className="pr-state"> {WORD[status]}</span>}
      {checks && <span className="pr-checks"> · {checks}</span>}
    </span>
  );
}
