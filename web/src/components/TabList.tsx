import { useRef, type KeyboardEvent, type ReactNode } from "react";

export interface Tab {
  id: string;
  label: ReactNode;
  /** The name for screen readers when the label alone does not say it all. */
  name?: string;
  /** Shown on hover (the whole of a label that is cut short). */
  title?: string;
}

export const tabId = (prefix: string, id: string) => `${prefix}-tab-${id}`;
export const panelId = (prefix: string) => `${prefix}-panel`;

interface Props {
  label: string;
  /** Prefix of the tab and panel element ids (the panel is `${prefix}-panel`). */
  prefix: string;
  tabs: Tab[];
  selected: string;
  onSelect: (id: string) => void;
}

/** ARIA tabs: one tab in the focus order, arrow keys / Home / End move and select. */
export function TabList({ label, prefix, tabs, selected, onSelect }: Props) {
  const list = useRef<HTMLDivElement>(null);
  const onKeyDown = (event: KeyboardEvent) => {
    const index = tabs.findIndex((tab) => tab.id === selected);
    const moves: Record<string, number> = {
      ArrowRight: index + 1,
      ArrowLeft: index - 1,
      Home: 0,
      End: tabs.length - 1,
    };
    const target = moves[event.key];
    if (target === undefined) return;
    event.preventDefault();
    const next = tabs[(target + tabs.length) % tabs.length];
    if (!next) return;
    onSelect(next.id);
    list.current?.querySelector<HTMLElement>(`#${CSS.escape(tabId(prefix, next.id))}`)?.focus();
  };
  return (
    <div role="tablist" aria-label={label} className="tablist" ref={list} onKeyDown={onKeyDown}>
      {tabs.map((tab) => (
        <button
          key={tab.id}
          type="button"
          role="tab"
          id={tabId(prefix, tab.id)}
          aria-selected={tab.id === selected}
          aria-label={tab.name}
          title={tab.title}
          aria-controls={panelId(prefix)}
          tabIndex={tab.id === selected ? 0 : -1}
          onClick={() => onSelect(tab.id)}
        >
          {tab.label}
        </button>
      ))}
    </div>
  );
}
