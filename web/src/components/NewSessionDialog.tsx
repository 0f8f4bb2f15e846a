import { useEffect, useState, type FormEvent } from "react";
import type { Branch, CreateSessionBody } from "../api/client";
import { useApi } from "../api/context";
import { ApiError } from "../api/http";
import { errorMessage } from "../api/errors";
import { Modal } from "./Modal";
import { RepositoryPicker } from "./RepositoryPicker";

type Field = "repository" | "branch" | "title" | "autoCommitPush" | "autoCreatePr" | "form";
type Errors = Partial<Record<Field, string>>;

/** The form field an API error names (`field` of `{error, code, field}`). */
export function fieldOf(apiField: string | null): Field {
  switch (apiField) {
    case "repoUrl":
    case "cloneUrl":
    case "repoOwner":
    case "repoName":
      return "repository";
    case "branch":
    case "isNewBranch":
      return "branch";
    case "title":
    case "autoCommitPush":
    case "autoCreatePr":
      return apiField;
    default:
      return "form";
  }
}

/** `owner/repo` (the API's repoOwner and repoName), else a URL or a local path (repoUrl). */
export function repositoryFields(
  value: string,
): Pick<CreateSessionBody, "repoUrl" | "repoOwner" | "repoName"> {
  const shorthand = /^([.\w-]+)\/([.\w-]+?)(?:\.git)?$/.exec(value);
  if (shorthand && !value.startsWith(".")) return { repoOwner: shorthand[1], repoName: shorthand[2] };
  return { repoUrl: value };
}

export function retryMessage(seconds: number | null, now = new Date()): string {
  if (seconds === null) return "Too many new sessions. Try again in a minute.";
  const at = new Date(now.getTime() + seconds * 1000).toLocaleTimeString();
  return `Too many new sessions. Try again in ${seconds} s (at ${at}).`;
}

interface Props {
  /** Local mode also takes an absolute path on this machine as the repository. */
  local: boolean;
  onClose: () => void;
  onCreated: (sessionId: string, chatId: string) => void;
}

function FieldError({ id, message }: { id: string; message: string | undefined }) {
  return message ? (
    <p id={id} className="field-error" role="alert">
      {message}
    </p>
  ) : null;
}

export function NewSessionDialog({ local, onClose, onCreated }: Props) {
  const api = useApi();
  const [repository, setRepository] = useState("");
  const [noRepository, setNoRepository] = useState(false);
  const [newBranch, setNewBranch] = useState(true);
  const [branch, setBranch] = useState("main");
  const [title, setTitle] = useState("");
  const [autoCommitPush, setAutoCommitPush] = useState(false);
  const [autoCreatePr, setAutoCreatePr] = useState(false);
  const [errors, setErrors] = useState<Errors>({});
  const [submitting, setSubmitting] = useState(false);
  const [branches, setBranches] = useState<Branch[] | null>(null);

  const pick = (repoUrl: string) => {
    setRepository(repoUrl);
    setNoRepository(false);
    setBranches(null);
    setErrors(({ repository: _, ...rest }) => rest);
    if (!repoUrl) return;
    api.branches(repoUrl).then(
      (answer) => {
        setBranches(answer.branches);
        const main = answer.branches.find((b) => b.default) ?? answer.branches[0];
        if (main) setBranch(main.name);
      },
      () => setBranches(null),
    );
  };

  useEffect(() => {
    let live = true;
    api.preferences().then(
      (preferences) => {
        if (!live) return;
        setAutoCommitPush(preferences.autoCommitPush);
        setAutoCreatePr(preferences.autoCreatePr);
      },
      () => undefined, // the toggles keep their defaults
    );
    return () => {
      live = false;
    };
  }, [api]);

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    const repo = repository.trim();
    if (!noRepository && !repo) {
      setErrors({ repository: "Enter a repository, or tick “No repository”." });
      return;
    }
    const body: CreateSessionBody = {
      ...(noRepository ? {} : repositoryFields(repo)),
      isNewBranch: newBranch,
      autoCommitPush,
      autoCreatePr: autoCommitPush && autoCreatePr,
      ...(newBranch ? {} : { branch: branch.trim() }),
      ...(title.trim() ? { title: title.trim() } : {}),
    };
    setSubmitting(true);
    setErrors({});
    try {
      const created = await api.createSession(body);
      onCreated(created.session.id, created.chat.id);
    } catch (failure) {
      if (failure instanceof ApiError && failure.status === 429) {
        setErrors({ form: retryMessage(failure.retryAfter) });
      } else if (failure instanceof ApiError) {
        setErrors({ [fieldOf(failure.field)]: failure.message });
      } else {
        setErrors({ form: errorMessage(failure) });
      }
    } finally {
      setSubmitting(false);
    }
  };

  const described = (field: Field, hint?: string) => ({
    "aria-invalid": errors[field] ? true : undefined,
    "aria-describedby":
      [hint, errors[field] ? `new-${field}-error` : undefined].filter(Boolean).join(" ") || undefined,
  });

  return (
    <Modal title="New session" onClose={onClose}>
      <form onSubmit={submit} noValidate className="form">
        <RepositoryPicker idPrefix="new-repo" value={repository} onPick={pick} />
        <label htmlFor="new-repository">Repository</label>
        <input
          id="new-repository"
          name="repository"
          value={noRepository ? "" : repository}
          onChange={(event) => setRepository(event.target.value)}
          required={!noRepository}
          disabled={noRepository}
          autoComplete="off"
          placeholder="https://github.com/owner/repo"
          {...described("repository", "new-repository-hint")}
        />
        <p id="new-repository-hint" className="hint">
          <code>owner/repo</code>, or an https:// URL of a repository on an allowed host (github.com by
          default){local ? ", or the absolute path of a git repository on this machine" : ""}.
        </p>
        <FieldError id="new-repository-error" message={errors.repository} />
        <label className="inline">
          <input
            type="checkbox"
            checked={noRepository}
            onChange={(event) => {
              setNoRepository(event.target.checked);
              setErrors(({ repository: _, ...rest }) => rest);
            }}
          />
          No repository (an empty workspace)
        </label>

        <fieldset>
          <legend>Branch</legend>
          <label className="inline">
            <input type="radio" name="branch-kind" checked={newBranch} onChange={() => setNewBranch(true)} />
            New branch (named for you
            {branches?.some((b) => b.default) ? `, from ${branches.find((b) => b.default)?.name}` : ""})
          </label>
          <label className="inline">
            <input
              type="radio"
              name="branch-kind"
              checked={!newBranch}
              onChange={() => setNewBranch(false)}
            />
            Existing branch
          </label>
          {!newBranch && branches && branches.length > 0 && (
            <>
              <label htmlFor="new-branch-pick">Branches of the repository</label>
              <select id="new-branch-pick" value={branch} onChange={(event) => setBranch(event.target.value)}>
                {branches.map((b) => (
                  <option key={b.name} value={b.name}>
                    {b.name}
                    {b.default ? " (default)" : ""}
                  </option>
                ))}
              </select>
            </>
          )}
          {!newBranch && (
            <>
              <label htmlFor="new-branch">Branch name</label>
              <input
                id="new-branch"
                value={branch}
                onChange={(event) => setBranch(event.target.value)}
                autoComplete="off"
                {...described("branch")}
              />
            </>
          )}
          <FieldError id="new-branch-error" message={errors.branch} />
        </fieldset>

        <label htmlFor="new-title">Title (optional)</label>
        <input
          id="new-title"
          value={title}
          onChange={(event) => setTitle(event.target.value)}
          placeholder="Named by the server when empty"
          maxLength={200}
          {...described("title")}
        />
        <FieldError id="new-title-error" message={errors.title} />

        <label className="inline">
          <input
            type="checkbox"
            checked={autoCommitPush}
            onChange={(event) => setAutoCommitPush(event.target.checked)}
            {...described("autoCommitPush")}
          />
          Auto-commit and push
        </label>
        <FieldError id="new-autoCommitPush-error" message={errors.autoCommitPush} />
        <label className="inline">
          <input
            type="checkbox"
            checked={autoCommitPush && autoCreatePr}
            disabled={!autoCommitPush}
            onChange={(event) => setAutoCreatePr(event.target.checked)}
            {...described("autoCreatePr")}
          />
          Auto-create pull request
        </label>
        <FieldError id="new-autoCreatePr-error" message={errors.autoCreatePr} />

        {errors.form && (
          <p role="alert" className="form-error">
            {errors.form}
          </p>
        )}
        <div className="dialog-actions">
          <button type="button" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" className="primary" disabled={submitting}>
            {submitting ? "Creating…" : "Create session"}
          </button>
        </div>
      </form>
    </Modal>
  );
}
