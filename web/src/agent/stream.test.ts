import { safeValidateTypes } from "@ai-sdk/provider-utils";
import { uiMessageChunkSchema } from "ai";
import { describe, expect, it, vi } from "vitest";
import approvalRun from "./fixtures/approval-question.json";
import scriptedRun from "./fixtures/scripted-turn.json";
import { foldRun, SEQ_MARKER, type AgentMessage, type Poll, type StreamPage } from "./stream";

// Recorded from `openagents dev` with the scripted model: examples/scripted-turn.json (text,
// reasoning, write ×2, bash ×2) and a run that edits, asks for an approval (rm -rf) and asks a
// question (ask_user_question), then waits.
const recordings = { scriptedRun, approvalRun } as Record<string, StreamPage>;

/** A fake long-poll endpoint over a recorded run, `size` events a page. */
function pollOver(run: StreamPage, size = 5, extra: Partial<Record<number, "fail" | "dup">> = {}) {
  const calls: number[] = [];
  const poll: Poll = async (after) => {
    calls.push(after);
    const mode = extra[calls.length];
    if (mode === "fail") throw new Error("network down");
    const start = mode === "dup" ? Math.max(0, after - 3) : after; // a server answering old events again
    const events = run.events.filter((e) => e.seq > start).slice(0, size);
    const lastSeq = run.events.at(-1)!.seq;
    if (events.length === 0 && after >= lastSeq) return null;
    const done = (events.at(-1)?.seq ?? after) >= lastSeq;
    return {
      runId: run.runId,
      status: done ? run.status : "running",
      events,
      next: events.at(-1)?.seq ?? after,
    };
  };
  return { poll, calls };
}

async function fold(
  run: StreamPage,
  options: { after?: number; message?: AgentMessage; size?: number } = {},
) {
  const { poll, calls } = pollOver(run, options.size);
  const states: Array<{ message: AgentMessage; seq: number | null }> = [];
  const errors: unknown[] = [];
  await foldRun({
    poll,
    after: options.after ?? 0,
    message: options.message,
    signal: new AbortController().signal,
    onMessage: (message, seq) => states.push({ message, seq }),
    onError: (error) => errors.push(error),
  });
  return { states, last: states.at(-1)!, errors, calls };
}

const visible = (message: AgentMessage) => message.parts.filter((part) => part.type !== SEQ_MARKER);

describe("recorded server chunks", () => {
  it.each(Object.entries(recordings))(
    "%s: every chunk satisfies ai's uiMessageChunkSchema",
    async (_, run) => {
      expect(run.events.length).toBeGreaterThan(5);
      for (const { seq, chunk } of run.events) {
        const result = await safeValidateTypes({ value: chunk, schema: uiMessageChunkSchema });
        expect(result.success, `seq ${seq}: ${JSON.stringify(chunk)}`).toBe(true);
      }
    },
  );

  it("the check itself rejects a malformed chunk", async () => {
    const bad = await safeValidateTypes({
      value: { type: "text-delta", id: "t" },
      schema: uiMessageChunkSchema,
    });
    expect(bad.success).toBe(false);
  });
});

describe("foldRun", () => {
  it("folds the scripted turn into text, reasoning and tool parts", async () => {
    const { last, errors } = await fold(scriptedRun as StreamPage);
    expect(errors).toEqual([]);
    const parts = visible(last.message);
    expect(last.message.id).toBe(scriptedRun.events[0]!.chunk.messageId);
    expect(parts.map((p) => p.type)).toEqual([
      "step-start",
      "reasoning",
      "text",
      "tool-write",
      "tool-write",
      "step-start",
      "text",
      "tool-bash",
      "step-start",
      "text",
      "tool-bash",
      "step-start",
      "text",
    ]);
    expect(parts[2]).toMatchObject({
      type: "text",
      text: "I'll add `multiply` in multiply.py with a pytest test next to it.",
    });
    expect(parts[3]).toMatchObject({ state: "output-available", input: { filePath: "multiply.py" } });
    expect(parts[7]).toMatchObject({ state: "output-available", output: { exitCode: 0 } });
    expect(last.seq).toBe(38);
  });

  it("folds an approval request and a waiting question", async () => {
    const { last } = await fold(approvalRun as StreamPage);
    const parts = visible(last.message);
    expect(parts.find((p) => p.type === "tool-bash")).toMatchObject({
      state: "approval-requested",
      approval: { id: "approval-scripted-0-1" },
    });
    expect(parts.find((p) => p.type === "tool-ask_user_question")).toMatchObject({
      state: "input-available",
    });
    expect(parts.find((p) => p.type === "tool-edit")).toMatchObject({ state: "output-available" });
  });

  it("gives the same message whatever the page size", async () => {
    const one = await fold(scriptedRun as StreamPage, { size: 1 });
    const many = await fold(scriptedRun as StreamPage, { size: 100 });
    expect(visible(one.last.message)).toEqual(visible(many.last.message));
  });

  it("resumes from a checkpoint (its seq and message) without duplicates", async () => {
    const whole = await fold(scriptedRun as StreamPage);
    // a checkpoint taken mid-run, as the app stores it after every update
    const mid = whole.states.find((s) => s.seq !== null && s.seq >= 20)!;
    const resumed = await fold(scriptedRun as StreamPage, { after: mid.seq!, message: mid.message });
    expect(resumed.calls[0]).toBe(mid.seq);
    expect(visible(resumed.last.message)).toEqual(visible(whole.last.message));
  });

  it("resumes identically from every state that carries a seq", async () => {
    const whole = await fold(scriptedRun as StreamPage, { size: 3 });
    const final = visible(whole.last.message);
    const marked = whole.states.filter((s) => s.seq !== null);
    expect(marked.length).toBeGreaterThan(10);
    for (const point of marked) {
      const resumed = await fold(scriptedRun as StreamPage, { after: point.seq!, message: point.message });
      expect(visible(resumed.last?.message ?? point.message)).toEqual(final);
    }
  });

  it("only marks safe seqs: never inside an open text or reasoning part", async () => {
    const { states } = await fold(scriptedRun as StreamPage, { size: 1 });
    const unsafe = new Set([4, 5, 6, 7, 10, 11, 20, 27, 34, 35]); // deltas and starts of open parts
    for (const { seq } of states) if (seq !== null) expect(unsafe.has(seq)).toBe(false);
  });

  it("drops duplicate events and retries a failed poll from the same seq", async () => {
    const { poll, calls } = pollOver(scriptedRun as StreamPage, 4, { 2: "dup", 3: "fail" });
    const onRetry = vi.fn();
    let last: AgentMessage | undefined;
    vi.useFakeTimers({ shouldAdvanceTime: true });
    try {
      await foldRun({
        poll,
        after: 0,
        signal: new AbortController().signal,
        onRetry,
        onMessage: (message) => (last = message),
      });
    } finally {
      vi.useRealTimers();
    }
    expect(onRetry).toHaveBeenCalledTimes(1);
    expect(calls[2]).toBe(calls[3]); // the failed poll is asked again from the same seq
    const whole = await fold(scriptedRun as StreamPage);
    expect(visible(last!)).toEqual(visible(whole.last.message));
  });

  it("stops when aborted", async () => {
    const controller = new AbortController();
    const poll: Poll = vi.fn(async () => {
      controller.abort();
      return { runId: "r", status: "running" as const, events: [], next: 0 };
    });
    await foldRun({ poll, after: 0, signal: controller.signal, onMessage: () => undefined });
    expect(poll).toHaveBeenCalledTimes(1);
  });

  it("reports an error chunk", async () => {
    const run: StreamPage = {
      runId: "r",
      status: "failed",
      next: 4,
      events: [
        { seq: 1, chunk: { type: "start", messageId: "m" } },
        { seq: 2, chunk: { type: "start-step" } },
        { seq: 3, chunk: { type: "error", errorText: "model unavailable" } },
        { seq: 4, chunk: { type: "finish", finishReason: "error" } },
      ],
    };
    const { errors } = await fold(run);
    expect(String(errors[0])).toContain("model unavailable");
  });
});
