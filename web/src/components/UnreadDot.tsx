/** The unread marker, for the eye only: its link or tab says "unread" in its accessible name. */
export function UnreadDot() {
  return <span className="unread-dot" aria-hidden="true" />;
}
