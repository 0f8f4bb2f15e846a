// "Working" on the session in the sidebar and on the chat tab while a turn runs; unread after it ends.
import { act, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Api } from "../api/client";
import type { StreamPage } from "../agent/stream";
import { useSessionList } from "../hooks/useSessionList";
import { chat, fakeApi, fullSession, renderWithApi, sandboxStatus, summary } from "../test/fakes";
import { ChatPanel } from "./ChatPanel";
import { Sidebar } from "./Sidebar";
import { Workspace } from "./Workspace";

const session = fullSession();

/** A turn's stream that runs (text streamed) until `end()`, then completes. */
function turn() {
  let ended = false;
  let started = false;
  const events = [
    { seq: 1, chunk: { type: "start", messageId: "a1" } },
    { seq: 2, chunk: { type: "start-step" } },
    { seq: 3, chunk: { type: "text-start", id: "t1" } },
    { seq: 4, chunk: { type: "text-delta", id: "t1", delta: "On it." } },
    { seq: 5, chunk: { type: "text-end", id: "t1" } },
  ];
  const finish = [
    { seq: 6, chunk: { type: "finish-step" } },
    { seq: 7, chunk: { type: "finish", finishReason: "stop" } },
  ];
  const stream = vi.fn(async (_chat: string, after: number): Promise<StreamPage | null> => {
    if (!started) return null;
    await new Promise((resolve) => setTimeout(resolve, 20));
    if (after < 5)
      return { runId: "r1", status: "running", events: events.filter((e) => e.seq > after), next: 5 };
    if (!ended) return { runId: "r1", status: "running", events: [], next: after };
    if (after < 7) return { runId: "r1", status: "completed", events: finish, next: 7 };
    return null;
  });
  const startTurn = vi.fn(async () => {
    started = true;
    return { runId: "r1", status: "running" as const };
  });
  return { stream, startTurn, end: () => (ended = true) };
}

afterEach(() => {
  window.history.replaceState(null, "", "/");
  Object.defineProperty(document, "visibilityState", { configurable: true, get: () => "visible" });
  localStorage.clear();
});

function SidebarHarness({ workingId }: { workingId: string | null }) {
  const active = useSessionList("active", true);
  return <Sidebar active={active} selectedId={null} workingId={workingId} onNewSession={vi.fn()} />;
}

describe("Working and unread", () => {
  it("the sidebar says Working for a session the server streams in or this client follows", async () => {
    const listSessions = vi.fn(async () => ({
      sessions: [
        summary({ id: "s1", title: "Lisbon", hasStreaming: true }),
        summary({ id: "s2", title: "Porto" }),
        summary({ id: "s3", title: "Faro", hasUnread: true }),
      ],
      nextCursor: null,
      archivedCount: 0,
      hasMore: false,
    }));
    renderWithApi(<SidebarHarness workingId="s2" />, fakeApi({ listSessions }));
    const lisbon = await screen.findByRole("link", { name: /Lisbon/ });
    expect(lisbon).toHaveAccessibleName(expect.stringMatching(/^Lisbon, working,/));
    expect(within(lisbon).getByText("Working")).toBeInTheDocument();
    expect(screen.getByRole("link", { name: /Porto/ })).toHaveAccessibleName(
      expect.stringMatching(/^Porto, working,/),
    );
    const faro = screen.getByRole("link", { name: /Faro/ });
    expect(faro).toHaveAccessibleName(expect.stringMatching(/^Faro, unread,/));
    expect(within(faro).queryByText("Working")).toBeNull();
  });

  it("a turn in the open session shows Working in the sidebar and on the chat tab until it ends", async () => {
    window.history.replaceState(null, "", "/sessions/s1/chats/c1");
    const { stream, startTurn, end } = turn();
    const api = fakeApi({
      listSessions: vi.fn(async () => ({
        sessions: [summary({ id: "s1", title: "Lisbon" })],
        nextCursor: null,
        archivedCount: 0,
        hasMore: false,
      })),
      getSession: vi.fn(async () => ({ session })),
      sandboxStatus: vi.fn(async () => sandboxStatus()),
      listChats: vi.fn(async () => ({ chats: [chat({ title: "Fix it" })], defaultModelId: "m" })),
      messages: vi.fn(async () => ({ messages: [], nextCursor: null })),
      markRead: vi.fn(async () => ({ success: true as const })),
      files: vi.fn(async () => ({ entries: [] })),
      models: vi.fn(async () => ({ models: [], defaultModelId: null, message: null })),
      runs: vi.fn(async () => ({ runs: [], nextCursor: null })),
      stream,
      startTurn,
    } as Partial<Api>);
    renderWithApi(<Workspace user="ana" local onSignOut={vi.fn()} />, api);
    const sidebar = screen.getByRole("navigation", { name: "Sessions" });
    const link = await within(sidebar).findByRole("link", { name: /Lisbon/ });
    expect(within(link).queryByText("Working")).toBeNull();
    await userEvent.type(await screen.findByRole("textbox", { name: "Message" }), "Fix it{Enter}");
    await screen.findByText("On it.", {}, { timeout: 5000 });
    await waitFor(() => expect(within(link).getByText("Working")).toBeInTheDocument());
    expect(screen.getByRole("tab", { name: "Fix it, working" })).toBeInTheDocument();
    await act(async () => end());
    await waitFor(() => expect(within(link).queryByText("Working")).toBeNull());
    expect(screen.getByRole("tab", { name: "Fix it" })).toBeInTheDocument();
  });

  it("a turn that ends in view is read; one that ends in a hidden tab stays unread until it is seen", async () => {
    const { stream, startTurn, end } = turn();
    const markRead = vi.fn(async () => ({ success: true as const }));
    const onRead = vi.fn();
    renderWithApi(
      <ChatPanel sessionId="s1" chatId="c1" onRead={onRead} onSent={vi.fn()} />,
      fakeApi({
        messages: vi.fn(async () => ({ messages: [], nextCursor: null })),
        models: vi.fn(async () => ({ models: [], defaultModelId: null, message: null })),
        runs: vi.fn(async () => ({ runs: [], nextCursor: null })),
        markRead,
        stream,
        startTurn,
      }),
    );
    await waitFor(() => expect(markRead).toHaveBeenCalledTimes(1)); // opened
    await userEvent.type(screen.getByRole("textbox", { name: "Message" }), "Go{Enter}");
    await screen.findByText("On it.", {}, { timeout: 5000 });
    let visibility = "hidden";
    Object.defineProperty(document, "visibilityState", { configurable: true, get: () => visibility });
    await act(async () => end());
    await screen.findByRole("button", { name: "Send" }); // the turn ended, out of sight
    expect(markRead).toHaveBeenCalledTimes(1);
    visibility = "visible";
    await act(async () => document.dispatchEvent(new Event("visibilitychange")));
    await waitFor(() => expect(markRead).toHaveBeenCalledTimes(2));
    expect(markRead).toHaveBeenLastCalledWith("s1", "c1");
    await waitFor(() => expect(onRead).toHaveBeenCalledTimes(2));
  });
});
