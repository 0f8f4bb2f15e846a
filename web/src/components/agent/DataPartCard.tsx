// A turn's data parts as inline cards: the auto-commit, push and PR outcomes (`data-commit`,
// `data-push`, `data-pr`) and a model-capacity wait (`data-waiting`).
// Their data follows services/auto_commit.py's outcome (branch, committed, commit, pushed,
// skipped; prNumber, prUrl, or pr: "skipped: …") and the reference's data-pr (status, skipReason).

import { useState } from "react";

type Data = Record<string, unknown>;
const asRecord = (value: unknown): Data =>
  value && typeof value === "object" && !Array.isArray(value) ? (value as Data) : {};
const text = (value: unknown): string | null => (typeof value === "string" && value ? value : null);
/** A link only to a web page (never `javascript:` or the like). */
const webUrl = (value: unknown): string | null => {
  const url = text(value);
  return url && /^https?:\/\//i.test(url) ? url : null;
};

export interface CommitOutcome {
  committed: boolean;
  pushed: boolean;
  branch: string | null;
  /** The short hash (the first word of the commit's output). */
  sha: string | null;
  subject: string | null;
  /** Why nothing was committed or pushed, in words. */
  skipped: string | null;
}

export function commitOutcome(data: unknown): CommitOutcome {
  const d = asRecord(data);
  const commit = text(d.commit) ?? text(d.sha) ?? "";
  const [sha, ...rest] = commit.split(/\s+/);
  // a card of the ship routes and auto-commit ({commit, subject, branch, source}) committed by
  // being there; auto-commit's older outcome says `committed`
  return {
    committed: d.committed === true || (d.committed === undefined && text(d.commit) !== null),
    pushed: d.pushed === true,
    branch: text(d.branch),
    sha: sha ? sha.slice(0, 12) : null,
    subject: text(d.subject) ?? text(d.message) ?? (rest.join(" ") || null),
    skipped: text(d.skipped) ?? text(d.error) ?? text(d.skipReason),
  };
}

export interface PrOutcome {
  number: number | null;
  title: string | null;
  /** open, closed or merged. */
  state: string | null;
  url: string | null;
  /** "created", "existing", "skipped" … (the reference's status), when given. */
  status: string | null;
  skipped: string | null;
}

export function prOutcome(data: unknown): PrOutcome {
  const d = asRecord(data);
  const number = typeof d.prNumber === "number" ? d.prNumber : typeof d.number === "number" ? d.number : null;
  const pr = text(d.pr);
  const skipped = text(d.skipReason) ?? (pr?.startsWith("skipped") ? pr.replace(/^skipped:?\s*/, "") : null);
  return {
    number,
    title: text(d.title),
    state: text(d.state),
    url: webUrl(d.prUrl) ?? webUrl(d.url),
    status: text(d.status) ?? (d.created === true ? "created" : d.created === false ? "existing" : null),
    skipped: number === null ? (skipped ?? "no pull request was opened") : skipped,
  };
}

function CommitCard({ data }: { data: unknown }) {
  const c = commitOutcome(data);
  const title = c.committed ? "Committed" : c.pushed ? "Pushed" : "Not committed";
  return (
    <article className={`data-card ${c.skipped ? "data-card-skipped" : "data-card-ok"}`} aria-label="Commit">
      <header className="tool-head">
        <span className="tool-name">{title}</span>
        {c.sha && <code>{c.sha}</code>}
        {c.branch && (
          <span className="muted">
            on <code>{c.branch}</code>
          </span>
        )}
        {c.committed && <span className="badge">{c.pushed ? "pushed" : "not pushed"}</span>}
      </header>
      {c.subject && <p className="data-card-line">{c.subject}</p>}
      {c.skipped && <p className="data-card-line muted">{capitalise(c.skipped)}.</p>}
    </article>
  );
}

function PrCard({ data }: { data: unknown }) {
  const pr = prOutcome(data);
  return (
    <article
      className={`data-card ${pr.number === null ? "data-card-skipped" : "data-card-ok"}`}
      aria-label="Pull request"
    >
      <header className="tool-head">
        <span className="tool-name">Pull request</span>
        {pr.number !== null &&
          (pr.url ? (
            <a href={pr.url} target="_blank" rel="noreferrer">
              PR #{pr.number}
            </a>
          ) : (
            <span>PR #{pr.number}</span>
          ))}
        {pr.state && <span className={`badge pr-badge pr-${pr.state}`}>{pr.state}</span>}
        {pr.status && <span className="badge">{pr.status}</span>}
      </header>
      {pr.title && <p className="data-card-line">{pr.title}</p>}
      {pr.skipped && <p className="data-card-line muted">No pull request: {pr.skipped}.</p>}
    </article>
  );
}

function PushCard({ data }: { data: unknown }) {
  const d = asRecord(data);
  const pushed = d.pushed === true;
  const sha = text(d.commit)?.slice(0, 12) ?? null;
  const reason = text(d.reason);
  return (
    <article className={`data-card ${pushed ? "data-card-ok" : "data-card-skipped"}`} aria-label="Push">
      <header className="tool-head">
        <span className="tool-name">{pushed ? "Pushed" : "Not pushed"}</span>
        {sha && <code>{sha}</code>}
        {text(d.branch) && (
          <span className="muted">
            to <code>{text(d.branch)}</code>
          </span>
        )}
      </header>
      {reason && <p className="data-card-line muted">{capitalise(reason)}.</p>}
    </article>
  );
}

const capitalise = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);

/** The turn waiting for the model's capacity (agent/throttle.py: `{reason, retryAt, error}`), one
 * part per message updated by each wait: waiting while `retryAt` is ahead, waited after. */
function WaitingCard({ data, now }: { data: unknown; now?: number }) {
  const [shown] = useState(() => Date.now()); // when it was first shown (a render stays pure)
  const d = asRecord(data);
  const at = text(d.retryAt) ? new Date(String(d.retryAt)) : null;
  const when = at && !Number.isNaN(at.getTime()) ? at : null;
  const ahead = when !== null && when.getTime() > (now ?? shown);
  const reason = text(d.reason) ?? "model capacity";
  const time = when?.toLocaleTimeString();
  return (
    <article className="data-card data-card-skipped" aria-label="Waiting" role="status">
      <header className="tool-head">
        <span className="tool-name">{ahead ? `Waiting for ${reason}` : `Waited for ${reason}`}</span>
      </header>
      {time && (
        <p className="data-card-line muted">{ahead ? `Retrying at ${time}.` : `Retried at ${time}.`}</p>
      )}
      {text(d.error) && <p className="data-card-line muted">{text(d.error)}</p>}
    </article>
  );
}

/** A data part: commit, push, PR and waiting as cards, any other as a labelled line. */
export function DataPartCard({ type, data, now }: { type: string; data: unknown; now?: number }) {
  if (type === "data-commit") return <CommitCard data={data} />;
  if (type === "data-waiting") return <WaitingCard data={data} now={now} />;
  if (type === "data-pr") return <PrCard data={data} />;
  if (type === "data-push") return <PushCard data={data} />;
  return (
    <div className="data-part">
      <span className="badge">{type.slice("data-".length)}</span> <code>{JSON.stringify(data)}</code>
    </div>
  );
}
