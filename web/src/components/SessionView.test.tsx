import { act, screen } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { chat, fakeApi, fullSession, renderWithApi, sandboxStatus } from "../test/fakes";
import { SessionView } from "./SessionView";

const session = fullSession();

beforeEach(() => vi.useFakeTimers({ shouldAdvanceTime: true }));
afterEach(() => vi.useRealTimers());

describe("SessionView", () => {
  it("polls the status chip every 15 s and counts down to hibernation", async () => {
    let serverTime = 1_000_000;
    const sandboxStatusCall = vi.fn(async () => {
      const status = sandboxStatus({ state: "active", serverTime, hibernateAfter: 1_000_000 + 20 * 60_000 });
      serverTime += 15_000;
      return status;
    });
    const api = fakeApi({
      getSession: vi.fn(async () => ({ session })),
      sandboxStatus: sandboxStatusCall,
      listChats: vi.fn(async () => ({ chats: [chat()], defaultModelId: "m" })),
      messages: vi.fn(async () => ({ messages: [], nextCursor: null })),
      markRead: vi.fn(async () => ({ success: true as const })),
      files: vi.fn(async () => ({ entries: [{ path: "README.md", type: "file" as const, size: 3 }] })),
    });
    renderWithApi(<SessionView sessionId="s1" chatId={null} onSessionsChanged={vi.fn()} />, api);
    expect(await screen.findByRole("status")).toHaveTextContent("Active");
    expect(screen.getByText(/Hibernates in/)).toHaveTextContent("Hibernates in 20:00");
    expect(screen.getByRole("button", { name: "Pause" })).toBeInTheDocument();
    expect(await screen.findByRole("button", { name: "README.md" })).toBeInTheDocument();
    expect(sandboxStatusCall).toHaveBeenCalledTimes(1);
    await act(() => vi.advanceTimersByTimeAsync(15_000));
    expect(sandboxStatusCall).toHaveBeenCalledTimes(2);
    expect(screen.getByText(/Hibernates in/)).toHaveTextContent("Hibernates in 19:45");
  });

  it("shows Hibernating as soon as Pause is answered, while the status still says active", async () => {
    let state: "active" | "hibernating" = "active";
    const status = vi.fn(async () =>
      sandboxStatus({ state, hibernateAfter: state === "active" ? 1_000_000 : null, serverTime: 1_000_000 }),
    );
    const pause = vi.fn(async () => ({ success: true as const, sessionId: "s1" }));
    const api = fakeApi({
      getSession: vi.fn(async () => ({ session })),
      sandboxStatus: status,
      pause: pause as unknown as typeof api.pause,
      listChats: vi.fn(async () => ({ chats: [chat()], defaultModelId: "m" })),
      messages: vi.fn(async () => ({ messages: [], nextCursor: null })),
      markRead: vi.fn(async () => ({ success: true as const })),
      files: vi.fn(async () => ({ entries: [] })),
    });
    renderWithApi(<SessionView sessionId="s1" chatId={null} onSessionsChanged={vi.fn()} />, api);
    expect(await screen.findByRole("status")).toHaveTextContent("Active");
    await act(async () => screen.getByRole("button", { name: "Pause" }).click());
    expect(pause).toHaveBeenCalledWith("s1");
    const calls = status.mock.calls.length;
    await act(() => vi.advanceTimersByTimeAsync(2_000)); // the server still says active
    expect(status.mock.calls.length).toBeGreaterThan(calls); // asked again soon, not in 15 s
    expect(screen.getByRole("status")).toHaveTextContent("Hibernating");
    expect(screen.queryByText(/Hibernates in/)).toBeNull();
    expect(screen.queryByRole("button", { name: "Pause" })).toBeNull();
    state = "hibernating";
    await act(() => vi.advanceTimersByTimeAsync(2_000));
    expect(screen.getByRole("status")).toHaveTextContent("Hibernating");
  });

  it("shows a paused sandbox with Resume and the cached diff", async () => {
    const api = fakeApi({
      getSession: vi.fn(async () => ({ session: { ...session, lifecycleState: "hibernated" as const } })),
      sandboxStatus: vi.fn(async () =>
        sandboxStatus({ state: "hibernated", hibernateAfter: null }, { status: "paused", hasSnapshot: true }),
      ),
      listChats: vi.fn(async () => ({ chats: [chat()], defaultModelId: "m" })),
      messages: vi.fn(async () => ({ messages: [], nextCursor: null })),
      markRead: vi.fn(async () => ({ success: true as const })),
      cachedDiff: vi.fn(async () => ({
        cachedAt: "2026-11-01T10:05:00Z",
        isStale: true as const,
        data: {
          base: "abc",
          totalAdditions: 2,
          totalDeletions: 1,
          files: [
            { path: "a.py", status: "modified" as const, additions: 2, deletions: 1, diff: "@@ -1 +1,2 @@" },
          ],
        },
      })),
    });
    renderWithApi(<SessionView sessionId="s1" chatId={null} onSessionsChanged={vi.fn()} />, api);
    expect(await screen.findByRole("status")).toHaveTextContent("Paused");
    expect(screen.queryByText(/Hibernates in/)).toBeNull();
    expect(screen.getByRole("button", { name: "Resume" })).toBeInTheDocument();
    expect(screen.getByText(/The sandbox is paused; resume it to browse its files/)).toBeInTheDocument();
    await act(async () => screen.getByRole("tab", { name: "Changes" }).click());
    expect(await screen.findByText(/Cached at/)).toBeInTheDocument();
    expect(screen.getByText("a.py")).toBeInTheDocument();
  });
});
