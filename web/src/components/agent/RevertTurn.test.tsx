import { screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it, vi } from "vitest";
import type { Api, RevertAnswer, Run } from "../../api/client";
import { fakeApi, renderWithApi } from "../../test/fakes";
import { ChatPanel } from "../ChatPanel";

const models = { models: [], defaultModelId: null, message: null };
const messages = [
  { id: "u1", role: "user", parts: [{ type: "text", text: "add calc" }] },
  { id: "a1", role: "assistant", parts: [{ type: "text", text: "Added calc.py." }] },
  { id: "u2", role: "user", parts: [{ type: "text", text: "just talk" }] },
  { id: "a2", role: "assistant", parts: [{ type: "text", text: "Sure." }] },
];

function run(overrides: Partial<Run>): Run {
  return {
    runId: "r1",
    chatId: "c1",
    messageId: "u1",
    assistantMessageId: "a1",
    modelId: "scripted/default",
    status: "completed",
    steps: 2,
    usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0 },
    startedAt: "2026-11-01T10:00:00Z",
    finishedAt: "2026-11-01T10:00:05Z",
    checkpoint: { ref: "refs/openagents/checkpoints/r1", commit: "a".repeat(40), files: 3 },
    reverted: false,
    revert: null,
    ...overrides,
  };
}

const saved = { ref: "refs/openagents/checkpoints/revert-v1", commit: "b".repeat(40), files: 4 };

function panel(revertRun: Api["revertRun"], runs: Api["runs"]) {
  const api = fakeApi({
    messages: vi.fn(async () => ({ messages, nextCursor: null })) as unknown as Api["messages"],
    markRead: vi.fn(async () => ({ success: true as const })),
    models: vi.fn(async () => models),
    stream: vi.fn(async () => null),
    runs,
    revertRun,
  });
  renderWithApi(<ChatPanel sessionId="s1" chatId="c1" onRead={vi.fn()} onSent={vi.fn()} />, api);
  return api;
}

describe("reverting a turn", () => {
  it("lists the files in a confirm dialog (a dry run), reverts and shows the marker", async () => {
    const talk = run({ runId: "r2", messageId: "u2", assistantMessageId: "a2", checkpoint: null });
    let reverted = false;
    const runs = vi.fn(async () => ({
      runs: reverted
        ? [
            { ...talk, reverted: true },
            run({
              reverted: true,
              revert: {
                revertId: "v1",
                at: "2026-11-01T11:00:00Z",
                userId: "alice",
                restored: 1,
                removed: 1,
                saved,
              },
            }),
          ]
        : [talk, run({})],
      nextCursor: null,
    }));
    const revertRun = vi.fn(async (_s: string, runId: string, dryRun: boolean): Promise<RevertAnswer> => {
      if (!dryRun) reverted = true;
      return {
        runId,
        dryRun,
        restored: ["app.py"],
        removed: ["calc.py"],
        saved: dryRun ? null : saved,
        revertedRuns: dryRun ? [] : ["r2", "r1"],
      };
    });
    panel(revertRun, runs);
    // only the turn that ran tools (it has a checkpoint) offers the revert
    const [button] = await screen.findAllByRole("button", { name: "Revert to before this turn" });
    expect(screen.getAllByRole("button", { name: "Revert to before this turn" })).toHaveLength(1);
    await userEvent.click(button!);
    const dialog = await screen.findByRole("dialog", { name: "Revert to before this turn?" });
    expect(revertRun).toHaveBeenCalledWith("s1", "r1", true);
    expect(within(dialog).getByText("app.py")).toBeInTheDocument();
    expect(within(dialog).getByText("calc.py")).toBeInTheDocument();
    expect(within(dialog).getByRole("heading", { name: "Removed" })).toBeInTheDocument();
    await userEvent.click(within(dialog).getByRole("button", { name: "Revert" }));
    expect(revertRun).toHaveBeenLastCalledWith("s1", "r1", false);
    await screen.findByText("Reverted to before this turn");
    expect(screen.queryByRole("dialog")).not.toBeInTheDocument();
    expect(screen.getByText("Added calc.py.")).toBeInTheDocument(); // the messages stay
  });

  it("cancelling the dialog reverts nothing; a refused revert says why", async () => {
    const runs = vi.fn(async () => ({ runs: [run({})], nextCursor: null }));
    const revertRun = vi.fn(async (_s: string, runId: string, dryRun: boolean): Promise<RevertAnswer> => {
      if (!dryRun) throw new Error("A turn is running in this session; stop it first");
      return { runId, dryRun, restored: [], removed: ["calc.py"], saved: null, revertedRuns: [] };
    });
    panel(revertRun, runs);
    const button = await screen.findByRole("button", { name: "Revert to before this turn" });
    await userEvent.click(button);
    await userEvent.click(await screen.findByRole("button", { name: "Cancel" }));
    expect(screen.queryByRole("dialog")).not.toBeInTheDocument();
    expect(revertRun).toHaveBeenCalledTimes(1);
    await userEvent.click(button);
    await userEvent.click(await screen.findByRole("button", { name: "Revert" }));
    await waitFor(() =>
      expect(screen.getByRole("alert")).toHaveTextContent("A turn is running in this session; stop it first"),
    );
    expect(screen.queryByText("Reverted to before this turn")).not.toBeInTheDocument();
  });
});
