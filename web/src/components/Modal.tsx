import { useEffect, useId, useRef, type KeyboardEvent, type ReactNode } from "react";

const FOCUSABLE = "input:not([disabled]), select, textarea, button:not([disabled]), a[href], [tabindex='0']";

interface Props {
  title: string;
  onClose: () => void;
  children: ReactNode;
  /** A selector of the element to focus first (default: the first focusable one). */
  initialFocus?: string;
}

/** A modal dialog: focus moves in and is trapped, Escape closes, focus returns to the opener. */
export function Modal({ title, onClose, children, initialFocus }: Props) {
  const titleId = useId();
  const dialog = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const opener = document.activeElement as HTMLElement | null;
    const root = dialog.current;
    (root?.querySelector<HTMLElement>(initialFocus ?? FOCUSABLE) ?? root)?.focus();
    return () => opener?.focus();
  }, [initialFocus]);
  const onKeyDown = (event: KeyboardEvent) => {
    if (event.key === "Escape") {
      event.stopPropagation();
      onClose();
      return;
    }
    if (event.key !== "Tab" || !dialog.current) return;
    const items = [...dialog.current.querySelectorAll<HTMLElement>(FOCUSABLE)];
    const first = items[0];
    const last = items[items.length - 1];
    if (event.shiftKey && document.activeElement === first) {
      event.preventDefault();
      last?.focus();
    } else if (!event.shiftKey && document.activeElement === last) {
      event.preventDefault();
      first?.focus();
    }
  };
  return (
    <div className="backdrop">
      <div
        className="dialog"
        role="dialog"
        aria-modal="true"
        aria-labelledby={titleId}
        ref={dialog}
        tabIndex={-1}
        onKeyDown={onKeyDown}
      >
        <h2 id={titleId}>{title}</h2>
        {children}
      </div>
    </div>
  );
}
