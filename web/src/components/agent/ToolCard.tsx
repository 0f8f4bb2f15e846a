import { useId, useState, type FormEvent } from "react";
import type { RespondBody } from "../../api/client";
import { errorMessage } from "../../api/errors";
import { PreviewCard, startedPorts } from "../PreviewCard";

/** A tool part as the AI SDK folds it (`tool-<name>` or `dynamic-tool`). */
export interface ToolPart {
  type: string;
  toolName?: string;
  toolCallId: string;
  state: string;
  input?: unknown;
  output?: unknown;
  errorText?: string;
  approval?: { id: string; approved?: boolean; reason?: string };
  /** The output so far of a call still running (the AI SDK's preliminary tool output). */
  preliminary?: boolean;
}

export function toolName(part: ToolPart): string {
  return part.type === "dynamic-tool" ? (part.toolName ?? "tool") : part.type.slice("tool-".length);
}

type Input = Record<string, unknown>;
const asRecord = (value: unknown): Input =>
  value && typeof value === "object" && !Array.isArray(value) ? (value as Input) : {};
const str = (value: unknown): string => (typeof value === "string" ? value : "");

function oneLine(text: string, max = 100): string {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

/** The input in one line: the path, the command, the pattern, the URL … */
export function inputSummary(name: string, input: unknown): string {
  const args = asRecord(input);
  switch (name) {
    case "read":
    case "write":
    case "edit":
      return str(args.filePath);
    case "bash":
      return oneLine(str(args.command));
    case "grep":
    case "glob":
      return oneLine([str(args.pattern), str(args.path)].filter(Boolean).join(" in "));
    case "web_fetch":
      return oneLine(`${str(args.method) || "GET"} ${str(args.url)}`);
    case "skill":
      return str(args.skill);
    case "todo_write":
      return `${Array.isArray(args.todos) ? args.todos.length : 0} items`;
    case "ask_user_question":
      return oneLine(
        (Array.isArray(args.questions) ? args.questions : [])
          .map((q) => str(asRecord(q).question))
          .join(" · "),
      );
    default:
      return oneLine(JSON.stringify(input ?? {}));
  }
}

const STATE_LABELS: Record<string, string> = {
  "input-streaming": "Preparing",
  "input-available": "Running",
  "approval-requested": "Needs approval",
  "approval-responded": "Approved",
  "output-available": "Done",
  "output-error": "Error",
  "output-denied": "Denied",
};

/** The loop's error text of a call the user stopped (agent/loop.py STOPPED). */
export const STOPPED = "Stopped by the user.";

/** A call ended by Stop: not an error of the tool's. */
export function stopped(part: ToolPart): boolean {
  return part.state === "output-error" && part.errorText === STOPPED;
}

function stateLabel(part: ToolPart, live: boolean): string {
  if (stopped(part)) return "Stopped";
  if (part.state === "output-available" && part.preliminary) return "Running";
  if (part.state === "input-available" && !live)
    return toolName(part) === "ask_user_question" ? "Waiting for you" : "Not finished";
  if (part.state === "approval-responded" && part.approval?.approved === false) return "Denied";
  return STATE_LABELS[part.state] ?? part.state;
}

/** Lines of a diff: old lines removed, new lines added (a whole-block diff, as the edit tool does it). */
function DiffView({ before, after, label }: { before: string; after: string; label: string }) {
  const lines = (text: string) => (text === "" ? [] : text.replace(/\n$/, "").split("\n"));
  return (
    <pre className="tool-diff" aria-label={label} tabIndex={0}>
      {lines(before).map((line, i) => (
        <span key={`-${i}`} className="diff-line diff-removed">
          {`- ${line}\n`}
        </span>
      ))}
      {lines(after).map((line, i) => (
        <span key={`+${i}`} className="diff-line diff-added">
          {`+ ${line}\n`}
        </span>
      ))}
    </pre>
  );
}

function outputText(output: unknown): string {
  if (typeof output === "string") return output;
  return JSON.stringify(output, null, 2);
}

/** A scrollable block of output: reachable with the keyboard (axe: scrollable-region-focusable). */
function Output({
  text,
  label,
  className = "tool-output",
}: {
  text: string;
  label: string;
  className?: string;
}) {
  return (
    <pre className={className} tabIndex={0} aria-label={label}>
      {text}
    </pre>
  );
}

/** stdout and stderr of a command (or its output so far), or the output as it came. */
function BashOutput({ output }: { output: unknown }) {
  const result = asRecord(output);
  const stdout = str(result.stdout) || str(result.output);
  const stderr = str(result.stderr);
  if (typeof result.exitCode !== "number" && !stdout && !stderr)
    return <Output text={outputText(output)} label="Output" />;
  return (
    <>
      {stdout && <Output text={stdout} label="Standard output" />}
      {stderr && <Output text={stderr} label="Standard error" className="tool-output tool-stderr" />}
      {!stdout && !stderr && <p className="muted">No output.</p>}
    </>
  );
}

function TodoList({ input }: { input: unknown }) {
  const todos = asRecord(input).todos;
  if (!Array.isArray(todos)) return null;
  const mark: Record<string, string> = { completed: "✓", in_progress: "▸", pending: "○", cancelled: "✕" };
  return (
    <ul className="todo-list">
      {todos.map((todo, i) => {
        const item = asRecord(todo);
        const status = str(item.status);
        return (
          <li key={str(item.id) || i} className={`todo-${status}`}>
            <span aria-hidden="true">{mark[status] ?? "○"}</span> {str(item.content)}
            <span className="visually-hidden"> ({status.replace("_", " ")})</span>
          </li>
        );
      })}
    </ul>
  );
}

type Respond = (body: RespondBody) => Promise<void>;

function ApprovalPrompt({ part, onRespond }: { part: ToolPart; onRespond: Respond }) {
  const id = useId();
  const [denying, setDenying] = useState(false);
  const [reason, setReason] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const answer = async (approved: boolean) => {
    setBusy(true);
    setError(null);
    try {
      await onRespond({
        toolCallId: part.toolCallId,
        approved,
        ...(approved || !reason.trim() ? {} : { reason: reason.trim() }),
      });
    } catch (failure) {
      setError(errorMessage(failure));
      setBusy(false);
    }
  };
  const deny = (event: FormEvent) => {
    event.preventDefault();
    void answer(false);
  };
  return (
    <div className="tool-prompt" role="group" aria-label="Approval">
      <p>{part.approval?.reason ?? "This call needs your approval."}</p>
      {denying ? (
        <form onSubmit={deny} className="deny-form">
          <label htmlFor={id}>Reason (optional, the agent sees it)</label>
          <input id={id} value={reason} onChange={(event) => setReason(event.target.value)} autoFocus />
          <button type="submit" disabled={busy}>
            Deny
          </button>
          <button type="button" onClick={() => setDenying(false)} disabled={busy}>
            Cancel
          </button>
        </form>
      ) : (
        <div className="prompt-actions">
          <button type="button" className="primary" onClick={() => void answer(true)} disabled={busy}>
            Approve
          </button>
          <button type="button" onClick={() => setDenying(true)} disabled={busy}>
            Deny…
          </button>
        </div>
      )}
      {error && (
        <p role="alert" className="form-error">
          {error}
        </p>
      )}
    </div>
  );
}

interface Question {
  question: string;
  header?: string;
  options: Array<{ label: string; description?: string }>;
  multiSelect?: boolean;
}

function QuestionPrompt({ part, onRespond }: { part: ToolPart; onRespond: Respond }) {
  const questions = (asRecord(part.input).questions ?? []) as Question[];
  const [picked, setPicked] = useState<Record<string, string[]>>({});
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const toggle = (q: Question, label: string) =>
    setPicked((current) => {
      const now = current[q.question] ?? [];
      const next = q.multiSelect
        ? now.includes(label)
          ? now.filter((l) => l !== label)
          : [...now, label]
        : [label];
      return { ...current, [q.question]: next };
    });
  const ready = questions.every((q) => (picked[q.question] ?? []).length > 0);
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    const answers = Object.fromEntries(
      questions.map((q) => [
        q.question,
        q.multiSelect ? (picked[q.question] ?? []) : (picked[q.question] ?? [])[0],
      ]),
    );
    try {
      await onRespond({ toolCallId: part.toolCallId, answers });
    } catch (failure) {
      setError(errorMessage(failure));
      setBusy(false);
    }
  };
  return (
    <form className="tool-prompt" onSubmit={submit} aria-label="Question">
      {questions.map((q, qi) => (
        <fieldset key={qi} className="question">
          <legend>
            {q.header && <span className="badge">{q.header}</span>} {q.question}
          </legend>
          {q.options.map((option) => (
            <label key={option.label} className="option">
              <input
                type={q.multiSelect ? "checkbox" : "radio"}
                name={`${part.toolCallId}-${qi}`}
                checked={(picked[q.question] ?? []).includes(option.label)}
                onChange={() => toggle(q, option.label)}
              />
              <span>{option.label}</span>
              {option.description && <span className="muted"> — {option.description}</span>}
            </label>
          ))}
        </fieldset>
      ))}
      <button type="submit" className="primary" disabled={!ready || busy}>
        Answer
      </button>
      {error && (
        <p role="alert" className="form-error">
          {error}
        </p>
      )}
    </form>
  );
}

interface Props {
  part: ToolPart;
  /** The run is still going (an unfinished call is running, not abandoned). */
  live: boolean;
  /** Set when the call waits for the user and may be answered now. */
  onRespond?: Respond;
  /** The session's (its previews may be asked for); none in a shared chat. */
  sessionId?: string;
}

/** One tool call: name, the input in one line, its state; details and output collapsed. */
export function ToolCard({ part, live, onRespond, sessionId }: Props) {
  const name = toolName(part);
  const args = asRecord(part.input);
  const output = asRecord(part.output);
  const exitCode = name === "bash" && typeof output.exitCode === "number" ? output.exitCode : null;
  const state = stateLabel(part, live);
  const waitsApproval = part.state === "approval-requested" && onRespond;
  // a command's output shows plainly while it runs (if the stream carries it) and when it failed
  const running = part.state === "output-available" && part.preliminary === true;
  const failed = exitCode !== null && exitCode !== 0 && !running;
  const started =
    name === "bash" && part.state === "output-available" && !running
      ? startedPorts(part.input, part.output)
      : [];
  const waitsAnswer = name === "ask_user_question" && part.state === "input-available" && onRespond;
  return (
    <article
      className={`tool-card tool-state-${stopped(part) ? "stopped" : part.state}`}
      aria-label={`Tool ${name}`}
    >
      <header className="tool-head">
        <span className="tool-name">{name}</span>
        <code className="tool-summary" title={inputSummary(name, part.input)}>
          {inputSummary(name, part.input)}
        </code>
        {exitCode !== null && (
          <span className={`badge ${exitCode === 0 ? "badge-ok" : "badge-bad"}`}>exit {exitCode}</span>
        )}
        <span className="tool-state">{state}</span>
      </header>
      {name === "edit" && (
        <DiffView
          before={str(args.oldString)}
          after={str(args.newString)}
          label={`Edit of ${str(args.filePath)}`}
        />
      )}
      {name === "write" && (
        <DiffView before="" after={str(args.content)} label={`Content of ${str(args.filePath)}`} />
      )}
      {name === "todo_write" && <TodoList input={part.input} />}
      {waitsApproval && <ApprovalPrompt part={part} onRespond={onRespond} />}
      {waitsAnswer && <QuestionPrompt part={part} onRespond={onRespond} />}
      {part.state === "output-error" &&
        (stopped(part) ? (
          <p className="muted">Stopped before it finished.</p>
        ) : (
          <p className="tool-error" role="note">
            {part.errorText}
          </p>
        ))}
      {part.state === "output-denied" && (
        <p className="muted">Denied{part.approval?.reason ? `: ${part.approval.reason}` : ""}.</p>
      )}
      {started.length > 0 && <PreviewCard sessionId={sessionId} ports={started} />}
      {running && name === "bash" && <BashOutput output={part.output} />}
      {failed && <BashOutput output={part.output} />}
      {part.state === "output-available" && !running && !failed && (
        <details className="tool-details">
          <summary>Output</summary>
          {name === "bash" ? (
            <BashOutput output={part.output} />
          ) : (
            <Output text={outputText(part.output)} label="Output" />
          )}
        </details>
      )}
      {name !== "edit" && name !== "write" && name !== "todo_write" && name !== "ask_user_question" && (
        <details className="tool-details">
          <summary>Input</summary>
          <Output text={JSON.stringify(part.input ?? null, null, 2)} label="Input" />
        </details>
      )}
    </article>
  );
}
