import { lazy, Suspense } from "react";
import type { RespondBody } from "../../api/client";
import { DataPartCard } from "./DataPartCard";
import { FileView } from "./FileView";
import type { ViewMessage } from "./message";
import { ToolCard, type ToolPart } from "./ToolCard";

// react-markdown, GFM and highlight.js load on first use: the app's first screen stays small
const Markdown = lazy(() => import("./Markdown"));

function Text({ text }: { text: string }) {
  return (
    <Suspense fallback={<div className="markdown plain-text">{text}</div>}>
      <Markdown text={text} />
    </Suspense>
  );
}

interface Usage {
  inputTokens?: number;
  outputTokens?: number;
  cacheReadTokens?: number;
  cacheWriteTokens?: number;
}

const count = (n: number) => (n >= 10_000 ? `${(n / 1000).toFixed(1)}k` : n.toLocaleString("en"));

/** "$0.0123", or "<$0.0001" for a cost too small to show. */
export const formatCost = (usd: number) => (usd > 0 && usd < 0.0001 ? "<$0.0001" : `$${usd.toFixed(4)}`);

/**
 * "1,203 in · 87 out · 900 cached tokens · est. $0.0123 · model" from the message's metadata (set
 * when a step is stored) and the estimated cost of its runs, when the server priced them.
 */
export function usageLine(metadata: unknown, costUsd?: number | null): string | null {
  const meta = (metadata ?? {}) as { usage?: Usage; modelId?: string };
  const usage = meta.usage;
  if (!usage) return null;
  const parts = [`${count(usage.inputTokens ?? 0)} in`, `${count(usage.outputTokens ?? 0)} out`];
  if (usage.cacheReadTokens) parts.push(`${count(usage.cacheReadTokens)} cached`);
  parts[parts.length - 1] += " tokens";
  if (typeof costUsd === "number") parts.push(`est. ${formatCost(costUsd)}`);
  if (meta.modelId) parts.push(meta.modelId);
  return parts.join(" · ");
}

interface Props {
  message: ViewMessage;
  /** The message is being streamed. */
  live?: boolean;
  /** The estimated cost of the runs that wrote it (GET …/runs), when known. */
  costUsd?: number | null;
  /** Answer a waiting approval or question of this message (only the latest, once its run waits). */
  onRespond?: (body: RespondBody) => Promise<void>;
  /** The session's: a server the agent started offers "Open preview" (none in a shared chat). */
  sessionId?: string;
}

/** One message: markdown text, collapsed reasoning, one card per tool call, data parts inline. */
export function MessageView({ message, live = false, costUsd = null, onRespond, sessionId }: Props) {
  if (message.role === "user")
    return (
      <div className="message-text">
        {message.parts.map((part, i) => {
          if (part.type === "text") return <p key={i}>{part.text}</p>;
          if (part.type === "file") return <FileView key={i} part={part} />;
          return null;
        })}
      </div>
    );
  const usage = live ? null : usageLine(message.metadata, costUsd);
  return (
    <div className="assistant-parts">
      {message.parts.map((part, i) => {
        if (part.type === "text") return <Text key={i} text={part.text ?? ""} />;
        if (part.type === "reasoning")
          return (
            <details key={i} className="reasoning">
              <summary>{live && part.state === "streaming" ? "Thinking…" : "Reasoning"}</summary>
              <div className="reasoning-text">{part.text}</div>
            </details>
          );
        if (part.type.startsWith("tool-") || part.type === "dynamic-tool")
          return (
            <ToolCard
              key={i}
              part={part as unknown as ToolPart}
              live={live}
              onRespond={onRespond}
              sessionId={sessionId}
            />
          );
        if (part.type.startsWith("data-")) return <DataPartCard key={i} type={part.type} data={part.data} />;
        return null; // step-start, sources, files
      })}
      {usage && <footer className="message-usage">{usage}</footer>}
    </div>
  );
}
