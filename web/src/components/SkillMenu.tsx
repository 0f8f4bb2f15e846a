// The composer's skill menu: typing `/` at the start of the message offers the repository's skills
// (GET /api/sessions/{id}/skills, read once when first asked for); ↑/↓ move, Enter or Tab picks
// (the message becomes `/name `), Escape closes it. The list is a listbox the message box points
// at with aria-activedescendant, so a screen reader follows the highlighted skill.
import { useEffect, useId, useRef, useState, type KeyboardEvent } from "react";
import type { Skill } from "../api/client";

/** Skills the menu shows at most (the API sends at most 100). */
export const MAX_SHOWN = 8;

/** The skill query when the message is `/` plus a word and nothing else, else null. */
export function skillQuery(text: string): string | null {
  const match = /^\/([^\s/]*)$/.exec(text);
  return match ? (match[1] ?? "") : null;
}

export function matchingSkills(skills: Skill[], query: string): Skill[] {
  const needle = query.toLowerCase();
  const starts = skills.filter((s) => s.name.toLowerCase().startsWith(needle));
  const contains = skills.filter(
    (s) => !s.name.toLowerCase().startsWith(needle) && s.name.toLowerCase().includes(needle),
  );
  return [...starts, ...contains].slice(0, MAX_SHOWN);
}

interface Options {
  text: string;
  setText: (text: string) => void;
  /** The session's skills; without it there is no menu. */
  loadSkills?: () => Promise<Skill[]>;
}

/** The menu's state, its key handling (true: the key was the menu's) and what the box needs. */
export function useSkillMenu({ text, setText, loadSkills }: Options) {
  const id = useId();
  const query = loadSkills ? skillQuery(text) : null;
  const [skills, setSkills] = useState<Skill[] | null>(null);
  const [failed, setFailed] = useState(false); // not asked again until the next `/`
  const loading = useRef(false);
  const [active, setActive] = useState(0);
  const [dismissed, setDismissed] = useState<string | null>(null);
  const asked = query !== null;
  // state that follows the text, adjusted while rendering (not in an effect)
  const [seen, setSeen] = useState({ query, asked });
  if (seen.query !== query || seen.asked !== asked) {
    setSeen({ query, asked });
    setActive(0);
    if (!asked) setFailed(false);
  }

  useEffect(() => {
    if (!asked || skills !== null || loading.current || failed || !loadSkills) return;
    loading.current = true;
    loadSkills()
      .then(setSkills, () => setFailed(true)) // no running sandbox (409), or a failure: no menu
      .finally(() => (loading.current = false));
  }, [asked, skills, failed, loadSkills]);

  const matches = query !== null && skills ? matchingSkills(skills, query) : [];
  const open = query !== null && dismissed !== text && matches.length > 0;
  const optionId = (index: number) => `${id}-skill-${index}`;
  const pick = (skill: Skill) => setText(`/${skill.name} `);

  const onKeyDown = (event: KeyboardEvent<HTMLTextAreaElement>): boolean => {
    if (!open) return false;
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      const step = event.key === "ArrowDown" ? 1 : -1;
      setActive((now) => (now + step + matches.length) % matches.length);
    } else if ((event.key === "Enter" && !event.shiftKey) || event.key === "Tab") {
      const chosen = matches[Math.min(active, matches.length - 1)];
      if (chosen) pick(chosen);
    } else if (event.key === "Escape") {
      setDismissed(text);
    } else {
      return false;
    }
    event.preventDefault();
    return true;
  };

  const boxProps = {
    "aria-autocomplete": "list" as const,
    "aria-controls": open ? `${id}-skills` : undefined,
    "aria-activedescendant": open ? optionId(Math.min(active, matches.length - 1)) : undefined,
  };

  const menu = open ? (
    <ul id={`${id}-skills`} role="listbox" aria-label="Skills" className="skill-menu">
      {matches.map((skill, index) => (
        <li
          key={skill.name}
          id={optionId(index)}
          role="option"
          aria-selected={index === active}
          className={index === active ? "skill-option skill-option-active" : "skill-option"}
          onMouseDown={(event) => {
            event.preventDefault(); // the message box keeps the focus
            pick(skill);
          }}
        >
          <span className="skill-name">/{skill.name}</span>
          {skill.description && <span className="skill-description"> {skill.description}</span>}
        </li>
      ))}
    </ul>
  ) : null;

  return { menu, onKeyDown, boxProps };
}
