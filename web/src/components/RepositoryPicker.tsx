import { useEffect, useState } from "react";
import type { Repository } from "../api/client";
import { useApi } from "../api/context";

/** The repositories the platform reaches (GET /api/repositories), searchable; hidden when the
 * API lists none or cannot (the repository field beside it takes a pasted URL either way). */
export function RepositoryPicker({
  idPrefix,
  value,
  onPick,
}: {
  /** Ids of the search box and the list: `${idPrefix}-search`, `${idPrefix}-pick`. */
  idPrefix: string;
  /** The repository chosen (its repoUrl), shown as chosen when the list has it. */
  value: string;
  onPick: (repoUrl: string) => void;
}) {
  const api = useApi();
  const [search, setSearch] = useState("");
  const [found, setFound] = useState<Repository[] | null>(null);

  useEffect(() => {
    let live = true;
    api.repositories(search.trim()).then(
      (page) => live && setFound(page.repositories),
      () => live && setFound(null),
    );
    return () => {
      live = false;
    };
  }, [api, search]);

  if (found === null && !search) return null;
  return (
    <fieldset className="repo-picker">
      <legend>Pick a repository</legend>
      <label htmlFor={`${idPrefix}-search`}>Search repositories</label>
      <input
        id={`${idPrefix}-search`}
        type="search"
        value={search}
        onChange={(event) => setSearch(event.target.value)}
        autoComplete="off"
      />
      <label htmlFor={`${idPrefix}-pick`}>Repositories</label>
      <select
        id={`${idPrefix}-pick`}
        value={found?.some((r) => r.repoUrl === value) ? value : ""}
        onChange={(event) => onPick(event.target.value)}
      >
        <option value="">{found && found.length === 0 ? "None found" : "Choose one…"}</option>
        {found?.map((repo) => (
          <option key={repo.repoUrl} value={repo.repoUrl}>
            {repo.owner ? `${repo.owner}/${repo.name}` : repo.name}
            {repo.private ? " (private)" : ""}
          </option>
        ))}
      </select>
    </fieldset>
  );
}
