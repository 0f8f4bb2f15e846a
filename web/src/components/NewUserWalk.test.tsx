// What a new user tripped on (issue 25), one test each (the ones of a component of their own sit
// beside it: ToolCard, Share, SessionView).
import { screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it, vi } from "vitest";
import type { Api, Run } from "../api/client";
import { axeViolations } from "../test/axe";
import { ApiContext } from "../api/context";
import { chat, fakeApi, fullSession, renderWithApi, sandboxStatus } from "../test/fakes";
import { fileResults } from "./ChatPanel";
import { FileBrowser } from "./FileBrowser";
import { SessionView } from "./SessionView";

const messages = [
  { id: "u1", role: "user", parts: [{ type: "text", text: "add calc" }] },
  { id: "a1", role: "assistant", parts: [{ type: "text", text: "Added calc.py." }] },
];

const run: Run = {
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
};

function view(overrides: Partial<Api>, data = fullSession()) {
  const api = fakeApi({
    getSession: vi.fn(async () => ({ session: data })),
    listChats: vi.fn(async () => ({
      chats: [chat(), chat({ id: "c2", title: "Other" })],
      defaultModelId: "m",
    })),
    messages: vi.fn(async () => ({ messages, nextCursor: null })) as unknown as Api["messages"],
    markRead: vi.fn(async () => ({ success: true as const })),
    models: vi.fn(async () => ({ models: [], defaultModelId: null, message: null })),
    stream: vi.fn(async () => null),
    runs: vi.fn(async () => ({ runs: [run], nextCursor: null })),
    getShare: vi.fn(async () => ({ shareId: null })),
    files: vi.fn(async () => ({ entries: [] })),
    ...overrides,
  });
  renderWithApi(<SessionView sessionId="s1" chatId={null} onSessionsChanged={vi.fn()} />, api);
  return api;
}

describe("a new user's walk (issue 25)", () => {
  it("an archived session offers only what works on it: Unarchive, no Revert, New chat, Rename or Delete", async () => {
    view(
      {
        sandboxStatus: vi.fn(async () =>
          sandboxStatus({ state: "archived", hibernateAfter: null }, { status: "no_sandbox" }),
        ),
      },
      fullSession({ status: "archived", lifecycleState: "archived" }),
    );
    await screen.findByText("Added calc.py.");
    await waitFor(() => expect(screen.getByRole("button", { name: "Unarchive" })).toBeInTheDocument());
    for (const name of [
      "Revert to before this turn",
      "New chat",
      "Rename chat",
      "Delete chat",
      "Delete from here",
      "Fork",
      "Archive",
      "Pause",
      "Resume",
    ])
      expect(screen.queryByRole("button", { name })).toBeNull();
    expect(await axeViolations()).toEqual([]);
  });

  it("an active session still offers Revert, the chat actions and the message actions", async () => {
    view({ sandboxStatus: vi.fn(async () => sandboxStatus()) });
    expect(await screen.findByRole("button", { name: "Revert to before this turn" })).toBeInTheDocument();
    for (const name of ["New chat", "Rename chat", "Delete chat", "Delete from here", "Fork"])
      expect(screen.getByRole("button", { name })).toBeInTheDocument();
  });
});

describe("the Files tree follows the work (issue 25)", () => {
  it("loads again in place when its version moves: new files show, open folders stay open", async () => {
    let root = [
      { path: "README.md", type: "file" as const, size: 3 },
      { path: "src", type: "dir" as const, size: 0 },
    ];
    const files = vi.fn(async (_s: string, path: string) =>
      path === "."
        ? { entries: root }
        : { entries: [{ path: "src/app.py", type: "file" as const, size: 1 }] },
    );
    const api = fakeApi({ files: files as unknown as Api["files"] });
    const { rerender } = renderWithApi(<FileBrowser sessionId="s1" chip="Active" version={0} />, api);
    await userEvent.click(await screen.findByRole("button", { name: "src/" }));
    expect(await screen.findByRole("button", { name: "app.py" })).toBeInTheDocument();
    root = [...root, { path: "greeting.txt", type: "file" as const, size: 5 }];
    rerender(
      <ApiContext.Provider value={api}>
        <FileBrowser sessionId="s1" chip="Active" version={1} />
      </ApiContext.Provider>,
    );
    expect(await screen.findByRole("button", { name: "greeting.txt" })).toBeInTheDocument();
    expect(screen.getByRole("button", { name: "src/" })).toHaveAttribute("aria-expanded", "true");
    expect(
      within(screen.getByRole("navigation", { name: "Workspace files" })).getByRole("button", {
        name: "app.py",
      }),
    ).toBeInTheDocument();
  });

  it("counts a turn's finished write, edit and bash results (not reads, not output so far)", () => {
    const part = (type: string, state: string, preliminary?: boolean) => ({ type, state, preliminary });
    expect(fileResults(null)).toBe(0);
    expect(
      fileResults({
        parts: [
          part("text", "done"),
          part("tool-read", "output-available"),
          part("tool-write", "output-available"),
          part("tool-edit", "input-available"),
          part("tool-bash", "output-available", true),
          part("tool-bash", "output-available"),
        ],
      }),
    ).toBe(2);
  });
});
