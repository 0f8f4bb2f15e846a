// Shipping the work from the app (issue 25): commit, discard, push and open a pull request; the
// pull request's merge readiness before Merge, and Fix checks when some failed; Publish to a
// repository for a session started without one.
import { useCallback, useId, useState, type FormEvent } from "react";
import type { MergeMethod, MergeReadiness } from "../api/client";
import { useApi } from "../api/context";
import { errorMessage } from "../api/errors";
import { useLoader } from "../hooks/useLoader";
import { ConfirmDialog } from "./ConfirmDialog";
import { RepositoryPicker } from "./RepositoryPicker";

type Outcome = { text: string; alert: boolean; url?: string } | null;

function Said({ outcome }: { outcome: Outcome }) {
  if (!outcome) return null;
  return (
    <p role={outcome.alert ? "alert" : "status"} className={outcome.alert ? "form-error" : "action-done"}>
      {outcome.text}
      {outcome.url && (
        <>
          {" "}
          <a href={outcome.url} target="_blank" rel="noreferrer">
            Open it
          </a>
        </>
      )}
    </p>
  );
}

interface ShipProps {
  sessionId: string;
  /** Uncommitted changes in the sandbox (Commit and Discard need some). */
  dirty: boolean;
  /** After a commit, discard, push or pull request: the diff, the chat's cards, the PR badge. */
  onShipped: () => void;
}

/** Commit (a message, or one generated), Discard, Push and Create PR. */
export function ShipActions({ sessionId, dirty, onShipped }: ShipProps) {
  const api = useApi();
  const id = useId();
  const [message, setMessage] = useState("");
  const [busy, setBusy] = useState<string | null>(null);
  const [outcome, setOutcome] = useState<Outcome>(null);
  const [discarding, setDiscarding] = useState(false);
  const act = async (name: string, action: () => Promise<Outcome>) => {
    setBusy(name);
    setOutcome(null);
    try {
      setOutcome(await action());
      onShipped();
    } catch (failure) {
      setOutcome({ text: `${name} failed: ${errorMessage(failure)}`, alert: true });
    } finally {
      setBusy(null);
    }
  };
  const commit = (event: FormEvent) => {
    event.preventDefault();
    void act("Commit", async () => {
      const done = await api.commit(sessionId, message.trim() || null);
      setMessage("");
      return { text: `Committed ${done.commit.slice(0, 7)}: ${done.subject}`, alert: false };
    });
  };
  const discard = () =>
    act("Discard", async () => {
      setDiscarding(false);
      const done = await api.discard(sessionId);
      return {
        text: `Discarded: ${done.restored.length} restored, ${done.removed.length} removed (saved first, so it can be undone).`,
        alert: false,
      };
    });
  const push = () =>
    act("Push", async () => {
      const done = await api.push(sessionId);
      return { text: `Pushed ${done.branch} at ${done.commit.slice(0, 7)}.`, alert: false };
    });
  const openPr = () =>
    act("Create PR", async () => {
      const { pullRequest: pr, created } = await api.openPullRequest(sessionId);
      const how = created ? "Opened" : "Already open:";
      return { text: `${how} PR #${pr.number} “${pr.title}”.`, alert: false, url: pr.url };
    });
  return (
    <section aria-labelledby={`${id}-heading`} className="ship">
      <h3 id={`${id}-heading`}>Ship</h3>
      <form className="ship-commit" onSubmit={commit}>
        <label htmlFor={`${id}-message`}>Commit message (optional)</label>
        <input
          id={`${id}-message`}
          value={message}
          onChange={(event) => setMessage(event.target.value)}
          placeholder="Generated from the diff when empty"
          maxLength={5000}
          aria-describedby={dirty ? undefined : `${id}-clean`}
        />
        <div className="toolbar">
          <button type="submit" className="primary" disabled={busy !== null || !dirty}>
            {busy === "Commit" ? "Committing…" : "Commit"}
          </button>
          <button
            type="button"
            className="danger-outline"
            disabled={busy !== null || !dirty}
            onClick={() => setDiscarding(true)}
          >
            Discard
          </button>
          <button type="button" disabled={busy !== null} onClick={() => void push()}>
            {busy === "Push" ? "Pushing…" : "Push"}
          </button>
          <button type="button" disabled={busy !== null} onClick={() => void openPr()}>
            {busy === "Create PR" ? "Creating PR…" : "Create PR"}
          </button>
        </div>
        {!dirty && (
          <p id={`${id}-clean`} className="hint">
            Nothing uncommitted to commit or discard.
          </p>
        )}
      </form>
      <Said outcome={outcome} />
      {discarding && (
        <ConfirmDialog
          title="Discard changes"
          message="Put every uncommitted change back as the last commit has it, and remove untracked files? The current state is saved first, so it can be undone."
          confirmLabel="Discard"
          onCancel={() => setDiscarding(false)}
          onConfirm={() => void discard()}
        />
      )}
    </section>
  );
}

/** "2 of 3 checks passed, 1 failed" (null without checks). */
export function checksSummary(checks: MergeReadiness["checks"]): string | null {
  if (checks.requiredTotal === 0) return null;
  const rest = [checks.pending && `${checks.pending} pending`, checks.failed && `${checks.failed} failed`]
    .filter(Boolean)
    .join(", ");
  return `${checks.passed} of ${checks.requiredTotal} checks passed${rest ? `, ${rest}` : ""}`;
}

interface PullProps {
  sessionId: string;
  /** After a merge or a fix turn started: the session (badge) and the chat reload. */
  onShipped: () => void;
}

/** The pull request's merge readiness (checks, what stops a merge), Merge, and Fix checks. */
export function MergePanel({ sessionId, onShipped }: PullProps) {
  const api = useApi();
  const id = useId();
  const load = useCallback(() => api.mergeReadiness(sessionId), [api, sessionId]);
  const { data, error, reload } = useLoader(load);
  const [method, setMethod] = useState<MergeMethod | null>(null);
  const [busy, setBusy] = useState<string | null>(null);
  const [outcome, setOutcome] = useState<Outcome>(null);
  if (error !== undefined)
    return (
      <p role="alert" className="form-error">
        Merge readiness unavailable: {errorMessage(error)}
      </p>
    );
  if (!data) return <p className="muted">Checking the pull request…</p>;
  if (!data.pr) return null;
  const act = async (name: string, action: () => Promise<Outcome>) => {
    setBusy(name);
    setOutcome(null);
    try {
      setOutcome(await action());
      onShipped();
    } catch (failure) {
      setOutcome({ text: `${name} failed: ${errorMessage(failure)}`, alert: true });
    } finally {
      setBusy(null);
      reload();
    }
  };
  const chosen = method ?? data.allowedMethods[0] ?? "merge";
  const summary = checksSummary(data.checks);
  const open = data.pr.state === "open";
  return (
    <section aria-labelledby={`${id}-heading`} className="merge-panel">
      <h3 id={`${id}-heading`}>
        Pull request{" "}
        <a href={data.pr.url} target="_blank" rel="noreferrer">
          #{data.pr.number}
        </a>
      </h3>
      <p>
        {data.pr.title} <span className="muted">({data.pr.state})</span>
      </p>
      {summary && <p className={data.checks.failed ? "form-error" : "muted"}>{summary}</p>}
      {open &&
        (data.canMerge ? (
          <p className="action-done">Ready to merge.</p>
        ) : (
          <ul className="plain merge-reasons" aria-label="Why it cannot be merged yet">
            {data.reasons.map((reason) => (
              <li key={reason}>{reason}</li>
            ))}
          </ul>
        ))}
      {open && (
        <div className="toolbar">
          {data.allowedMethods.length > 1 && (
            <>
              <label htmlFor={`${id}-method`}>Merge method</label>
              <select
                id={`${id}-method`}
                value={chosen}
                onChange={(event) => setMethod(event.target.value as MergeMethod)}
              >
                {data.allowedMethods.map((m) => (
                  <option key={m} value={m}>
                    {m}
                  </option>
                ))}
              </select>
            </>
          )}
          <button
            type="button"
            className="primary"
            disabled={!data.canMerge || busy !== null}
            onClick={() =>
              void act("Merge", async () => {
                await api.merge(sessionId, chosen);
                return { text: `Merged PR #${data.pr?.number}.`, alert: false };
              })
            }
          >
            {busy === "Merge" ? "Merging…" : "Merge"}
          </button>
          {data.checks.failed > 0 && (
            <button
              type="button"
              disabled={busy !== null}
              onClick={() =>
                void act("Fix checks", async () => {
                  const started = await api.fixChecks(sessionId);
                  const names = started.checks.map((check) => check.name).join(", ");
                  return { text: `The agent is fixing ${names} in the chat.`, alert: false };
                })
              }
            >
              {busy === "Fix checks" ? "Starting…" : "Fix checks"}
            </button>
          )}
        </div>
      )}
      <Said outcome={outcome} />
    </section>
  );
}

interface PublishProps {
  sessionId: string;
  /** After the repository is recorded: the session (and this panel's place) reloads. */
  onPublished: () => void;
}

/** A session started without a repository: publish its committed work to an existing
 * repository (picked or pasted) or to a new GitHub repository (where the API allows it). */
export function PublishRepository({ sessionId, onPublished }: PublishProps) {
  const api = useApi();
  const id = useId();
  const [kind, setKind] = useState<"existing" | "new">("existing");
  const [repoUrl, setRepoUrl] = useState("");
  const [name, setName] = useState("");
  const [isPrivate, setIsPrivate] = useState(true);
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<Outcome>(null);
  const publish = async (event: FormEvent) => {
    event.preventDefault();
    const target = kind === "existing" ? repoUrl.trim() : name.trim();
    if (!target) {
      const what =
        kind === "existing" ? "Pick or paste a repository first." : "Name the new repository first.";
      setOutcome({ text: what, alert: true });
      return;
    }
    setBusy(true);
    setOutcome(null);
    try {
      const body =
        kind === "existing" ? { repoUrl: target } : { create: { name: target, private: isPrivate } };
      const { session } = await api.attachRepository(sessionId, body);
      const where = session.repoOwner
        ? `${session.repoOwner}/${session.repoName}`
        : (session.repoName ?? target);
      setOutcome({ text: `Published to ${where} on ${session.branch ?? "its branch"}.`, alert: false });
      onPublished();
    } catch (failure) {
      setOutcome({ text: `Publish failed: ${errorMessage(failure)}`, alert: true });
    } finally {
      setBusy(false);
    }
  };
  return (
    <section aria-labelledby={`${id}-heading`} className="publish">
      <h3 id={`${id}-heading`}>Publish to a repository</h3>
      <p className="hint">
        This session has no repository yet. Its committed work is pushed to a branch of its own there (commit
        first to include uncommitted changes).
      </p>
      <form className="form" onSubmit={(event) => void publish(event)} noValidate>
        <fieldset>
          <legend>Where</legend>
          <label className="inline">
            <input
              type="radio"
              name={`${id}-kind`}
              checked={kind === "existing"}
              onChange={() => setKind("existing")}
            />
            An existing repository
          </label>
          <label className="inline">
            <input
              type="radio"
              name={`${id}-kind`}
              checked={kind === "new"}
              onChange={() => setKind("new")}
            />
            A new GitHub repository
          </label>
        </fieldset>
        {kind === "existing" ? (
          <>
            <RepositoryPicker idPrefix={`${id}-repo`} value={repoUrl} onPick={setRepoUrl} />
            <label htmlFor={`${id}-url`}>Repository</label>
            <input
              id={`${id}-url`}
              value={repoUrl}
              onChange={(event) => setRepoUrl(event.target.value)}
              placeholder="https://github.com/owner/repo"
              autoComplete="off"
            />
          </>
        ) : (
          <>
            <label htmlFor={`${id}-name`}>New repository name</label>
            <input
              id={`${id}-name`}
              value={name}
              onChange={(event) => setName(event.target.value)}
              maxLength={100}
              autoComplete="off"
            />
            <label className="inline">
              <input
                type="checkbox"
                checked={isPrivate}
                onChange={(event) => setIsPrivate(event.target.checked)}
              />
              Private
            </label>
          </>
        )}
        <div className="toolbar">
          <button type="submit" className="primary" disabled={busy}>
            {busy ? "Publishing…" : "Publish"}
          </button>
        </div>
      </form>
      <Said outcome={outcome} />
    </section>
  );
}
