import { waitFor } from "@testing-library/react";
import { describe, expect, it, vi } from "vitest";
import type { Api, Run } from "../../api/client";
import { fakeApi, renderWithApi } from "../../test/fakes";
import { ChatPanel } from "../ChatPanel";
import { formatCost, usageLine } from "./MessageView";

const run = (overrides: Partial<Run>): Run => ({
  runId: "r1",
  chatId: "c1",
  assistantMessageId: "a1",
  messageId: "u1",
  reverted: false,
  modelId: "bedrock/claude",
  status: "completed",
  steps: 2,
  usage: { inputTokens: 1203, outputTokens: 87, cacheReadTokens: 900, cacheWriteTokens: 0 },
  costUsd: null,
  startedAt: "2026-12-01T10:00:00Z",
  finishedAt: "2026-12-01T10:00:03Z",
  ...overrides,
});

const assistant = (id: string) => ({
  id,
  role: "assistant" as const,
  parts: [{ type: "text", text: `Answer ${id}` }],
  metadata: {
    modelId: "bedrock/claude",
    usage: { inputTokens: 1203, outputTokens: 87, cacheReadTokens: 900, cacheWriteTokens: 0 },
  },
});

const footers = () => [...document.querySelectorAll(".message-usage")];

describe("a turn's usage in its footer", () => {
  it("says tokens and, when the server priced the run, its estimated cost", () => {
    const meta = assistant("a1").metadata;
    expect(usageLine(meta)).toBe("1,203 in · 87 out · 900 cached tokens · bedrock/claude");
    expect(usageLine(meta, 0.01234)).toBe(
      "1,203 in · 87 out · 900 cached tokens · est. $0.0123 · bedrock/claude",
    );
    expect(usageLine({})).toBeNull();
    expect(formatCost(0.00001)).toBe("<$0.0001");
  });

  it("puts each message's runs' cost (summed: a continued run writes the same message) in its footer", async () => {
    const runs = vi.fn(async () => ({
      runs: [
        run({ runId: "r3", assistantMessageId: "a2", costUsd: null }),
        run({ runId: "r2", assistantMessageId: "a1", costUsd: 0.02 }),
        run({ runId: "r1", assistantMessageId: "a1", costUsd: 0.0005 }),
      ],
      nextCursor: null,
    }));
    const api: Partial<Api> = {
      messages: vi.fn(async () => ({ messages: [assistant("a1"), assistant("a2")], nextCursor: null })),
      markRead: vi.fn(async () => ({ success: true as const })),
      models: vi.fn(async () => ({ models: [], defaultModelId: null, message: null })),
      stream: vi.fn(async () => null),
      runs,
    };
    renderWithApi(<ChatPanel sessionId="s1" chatId="c1" onRead={vi.fn()} onSent={vi.fn()} />, fakeApi(api));
    await waitFor(() => expect(footers()).toHaveLength(2));
    await waitFor(() => expect(footers()[0]).toHaveTextContent("est. $0.0205"));
    const [first, second] = footers();
    expect(first).toHaveTextContent("1,203 in · 87 out · 900 cached tokens · est. $0.0205 · bedrock/claude");
    expect(second).not.toHaveTextContent("est.");
    expect(runs).toHaveBeenCalledWith("s1");
  });
});
