import type { ChipLabel } from "../lifecycle/status";

const TONE: Record<ChipLabel, string> = {
  Provisioning: "busy",
  Active: "ok",
  Hibernating: "busy",
  Paused: "idle",
  Restoring: "busy",
  Archived: "idle",
  Failed: "bad",
  "No sandbox": "idle",
};

interface Props {
  label: ChipLabel;
  detail?: string | null;
  /** The sidebar's compact badge is not announced as a live status. */
  live?: boolean;
}

/** A state chip; a failed one carries its error on hover (title) and for screen readers. */
export function StatusChip({ label, detail, live = false }: Props) {
  return (
    <span
      className={`chip chip-${TONE[label]}`}
      title={detail ?? undefined}
      role={live ? "status" : undefined}
      data-state={label}
    >
      {label}
      {detail && <span className="visually-hidden">: {detail}</span>}
    </span>
  );
}
