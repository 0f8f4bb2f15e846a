import { useSyncExternalStore } from "react";

/** Whether a CSS media query matches now (false where there is no matchMedia, as in jsdom). */
export function useMediaQuery(query: string): boolean {
  return useSyncExternalStore(
    (listener) => {
      const list = window.matchMedia?.(query);
      list?.addEventListener("change", listener);
      return () => list?.removeEventListener("change", listener);
    },
    () => window.matchMedia?.(query).matches ?? false,
  );
}

/** The one-column layout of phones (the CSS switches at the same width). */
export const NARROW = "(max-width: 799px)";
